"""The hook's early re-measurement after each pass, on SQLite and PostgreSQL: asked
for the running tasks the writer marked; never in legacy or shadow mode or in a
dry run; and never failing a pass."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from test_db_support import running_task, task_row

from panda_predictor.db.early_remeasure import early_remeasure_table
from panda_predictor.db.engine import dialect_of
from panda_predictor.hook.report import pass_summary
from panda_predictor.hook.submit import HOOK, SubmitHook
from panda_predictor.metrics import EARLY_REMEASURES, FALLBACKS


def _hook(settings, db) -> SubmitHook:
    def no_model():
        raise AssertionError("no task is eligible: the pass must load no model")

    return SubmitHook(
        settings, engine=db, predictor_factory=no_model, history_factory=lambda: None
    )


def test_a_pass_asks_panda_to_remeasure_running_tasks_it_wrote(db, settings):
    running_task(db, settings, 1, 3)
    running_task(db, settings, 2, 1)
    counted = EARLY_REMEASURES.labels(HOOK)._value.get()

    report = _hook(settings, db).run_once()

    assert report.failure is None
    assert report.remeasured_early == [1]
    assert "1 running tasks asked to be re-measured early" in pass_summary(report)
    assert EARLY_REMEASURES.labels(HOOK)._value.get() == counted + 1
    assert task_row(db, settings, 1)["walltimeunit"] is None
    assert task_row(db, settings, 2)["walltimeunit"] == "kSI2kseconds"
    assert _hook(settings, db).run_once().remeasured_early == []  # asked once


@pytest.mark.parametrize(
    ("update", "dry_run"),
    [
        pytest.param({"mode": "legacy"}, False, id="kill-switch"),
        pytest.param({"mode": "shadow"}, False, id="shadow"),
        pytest.param({}, True, id="dry-run"),
    ],
)
def test_legacy_shadow_dry_run_or_the_setting_off_ask_nothing(
    db, settings, update, dry_run
):
    running_task(db, settings, 1, 3)
    settings = settings.model_copy(update=update)

    report = _hook(settings, db).run_once(dry_run=dry_run)

    assert report.failure is None and report.remeasured_early == []
    assert task_row(db, settings, 1)["walltimeunit"] == "kSI2kseconds"


def test_a_failing_early_remeasurement_fails_open_and_the_pass_stands(
    db, settings, caplog
):
    running_task(db, settings, 1, 3)
    table = early_remeasure_table(settings.plugin_schema_for(dialect_of(db)))
    with db.begin() as conn:
        conn.execute(sa.text(f"DROP TABLE {table.fullname}"))
    fallbacks = FALLBACKS.labels(HOOK, "early_remeasure")._value.get()

    report = _hook(settings, db).run_once()

    assert report.failure is None and report.remeasured_early == []
    assert FALLBACKS.labels(HOOK, "early_remeasure")._value.get() == fallbacks + 1
    assert "early re-measurement failed" in caplog.text
    assert task_row(db, settings, 1)["walltimeunit"] == "kSI2kseconds"
