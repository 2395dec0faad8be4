"""The outcome table on SQLite and PostgreSQL: patch 0002, upsert, read, CLI."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
from click.testing import CliRunner

from panda_predictor.db.engine import make_engine
from panda_predictor.db.migrations import (
    expected_version,
    init_database,
    schema_version,
)
from panda_predictor.db.outcomes import read_outcomes, upsert_outcomes


def _row(task_id: int, cls: int) -> dict:
    row = {
        "jeditaskid": task_id,
        "model_name": "m",
        "model_version": "1",
        "decision": "applied",
        "predicted_at": datetime(2025, 3, 3),
        "n_jobs": 3,
        "n_failed_memory": 0,
        "mem_requested_gbh": 2.0,
        "mem_used_gbh": 1.0,
        "evaluated_at": datetime(2025, 3, 10),
    }
    for t in ("ramcount", "cputime", "iointensity", "walltime"):
        row.update(
            {f"{t}_pred_class": cls, f"{t}_true_class": 1, f"{t}_true_value": 123.5}
        )
    return row


def test_outcomes_upsert_and_read(settings):
    engine = make_engine(settings)
    try:
        # The outcome table came with patch 0002; later patches may follow it.
        newest = expected_version(engine.dialect.name)
        assert newest >= 2
        assert init_database(engine, settings, with_panda_tables=True)["plugin"] == (
            newest
        )
        assert schema_version(engine, settings) == newest
        with engine.begin() as conn:
            assert (
                upsert_outcomes(conn, settings, pd.DataFrame([_row(1, 0), _row(2, 1)]))
                == 2
            )
        with engine.begin() as conn:
            upsert_outcomes(conn, settings, pd.DataFrame([_row(2, 2)]))
        frame = read_outcomes(engine, settings).set_index("jeditaskid")
        assert list(frame.index) == [1, 2]
        assert frame.loc[2, "ramcount_pred_class"] == 2
        assert frame.loc[1, "ramcount_true_value"] == 123.5
        assert read_outcomes(engine, settings, since=datetime(2025, 4, 1)).empty
    finally:
        engine.dispose()


def test_feedback_cli_with_nothing_audited(settings):
    from panda_predictor.cli.feedback import feedback

    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    engine.dispose()
    result = CliRunner().invoke(feedback, [], obj=settings)
    assert result.exit_code == 0, result.output
    assert "0 audited tasks, 0 outcome rows written." in result.output
    assert "No outcomes yet" in result.output
