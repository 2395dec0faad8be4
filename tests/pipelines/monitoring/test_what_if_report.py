"""The what-if report reads audit, outcome and job rows on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from panda_predictor.core.decide.rollout import route
from panda_predictor.db.audit_writer import write_audit
from panda_predictor.db.engine import get_panda_tables
from panda_predictor.db.outcomes import upsert_outcomes
from pipelines.monitoring.what_if_report import format_what_if, what_if_report
from tests.test_db_support import make_prediction

START = datetime(2026, 11, 2, 6, 0)


def _outcome(task_id: int, decision: str, ram_true: int, **figures) -> dict:
    row = {
        "jeditaskid": task_id,
        "model_name": "panda-predictor",
        "model_version": "3",
        "decision": decision,
        "predicted_at": START,
        "n_jobs": 2,
        "n_failed_memory": 0,
        "n_failed_time": 0,
        "mem_requested_gbh": 20.0,
        "mem_used_gbh": 5.0,
        "evaluated_at": START + timedelta(days=3),
    }
    # make_prediction predicts ramcount class 2, cputime 1, iointensity 0, walltime 0.
    for target, (pred, true) in {
        "ramcount": (2, ram_true),
        "cputime": (1, 1),
        "iointensity": (0, 0),
        "walltime": (0, 0),
    }.items():
        row.update(
            {
                f"{target}_pred_class": pred,
                f"{target}_true_class": true,
                f"{target}_true_value": 1.0,
            }
        )
    row.update(figures)
    return row


@pytest.fixture
def audited(db, settings):
    """Two shadow tasks and one held-back task with outcome and job rows."""
    cases = [
        # (task, mode, share, decision the model took, measured ramcount class)
        (101, "shadow", 1.0, "applied", 2),
        (102, "shadow", 1.0, "applied", 3),
        (103, "predict", 0.0, "applied", 1),
    ]
    jobs = get_panda_tables(settings, db).jobsarchived4
    outcomes = []
    for task_id, mode, share, decision, ram_true in cases:
        routed = route(make_prediction(task_id, decision), mode, share)
        assert write_audit(db, settings, routed, written=False)
        outcomes.append(_outcome(task_id, routed.decision, ram_true, n_failed_memory=1))
        with db.begin() as conn:
            for number, (hours, scout) in enumerate([(2.0, True), (1.0, False)]):
                conn.execute(
                    sa.insert(jobs),
                    {
                        "pandaid": task_id * 10 + number,
                        "jeditaskid": task_id,
                        "jobstatus": "finished",
                        "specialhandling": "sj" if scout else None,
                        "corecount": 8,
                        "starttime": START,
                        "endtime": START + timedelta(hours=hours),
                    },
                )
    with db.begin() as conn:
        upsert_outcomes(conn, settings, pd.DataFrame(outcomes))
    return settings


def test_what_if_report_from_the_database(audited):
    report = what_if_report(audited)
    summary = report.summary.set_index("group")
    assert list(summary.index) == ["shadow", "held_back", "all"]
    # 102 under-allocates memory (class 2 < 3): its 2 jobs at risk, no hours saved.
    assert summary.loc["shadow", "under_memory_tasks"] == 1
    assert summary.loc["shadow", "jobs_at_risk"] == 2
    # 101 and 103 cover the need: the slowest scout ran 2 h in each.
    assert summary.loc["shadow", "scout_hours_saved"] == pytest.approx(2.0)
    assert summary.loc["held_back", "scout_hours_saved"] == pytest.approx(2.0)
    assert summary.loc["all", "failed_memory_jobs_avoided"] == 2
    # 3000 MB/core x 24 core-hours = 70.3125 GB-h reserved, 5 used.
    assert summary.loc["held_back", "model_unused_gbh"] == pytest.approx(
        3000 * 24 / 1024 - 5
    )
    assert summary.loc["held_back", "scouts_unused_gbh"] == pytest.approx(15.0)
    text = format_what_if(report.summary)
    assert "scout h saved" in text and "held_back" in text


def test_what_if_report_without_outcomes_says_so(db, settings):
    report = what_if_report(settings)
    assert report.summary.empty
    assert "No what-if figures" in format_what_if(report.summary)


def test_feedback_cli_prints_the_decision_and_what_if_tables(audited):
    from panda_predictor.cli.feedback import feedback

    result = CliRunner().invoke(feedback, ["--what-if"], obj=audited)
    assert result.exit_code == 0, result.output
    assert "3 audited tasks" in result.output
    assert "By decision" in result.output
    assert "What if the model had decided" in result.output
    # The jobs carry no memory or CPU figures: feedback cannot measure the need,
    # so every would-apply task is unscored and nothing counts as saved.
    table = result.output.split("What if the model had decided")[1]
    header, *lines = table.strip().splitlines()[1:]
    cells = {line.split()[0]: line.split() for line in lines}
    assert set(cells) == {"shadow", "held_back", "all"}
    assert "unscored" in header and "scout h saved" in header
    # group, tasks, would apply, under mem, under time, unscored, ..., scout h saved
    assert cells["all"][:6] == ["all", "3", "3", "0", "0", "3"]
    assert cells["all"][9] == "0.0"
