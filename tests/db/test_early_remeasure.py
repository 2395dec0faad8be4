"""The early re-measurement on SQLite and PostgreSQL: which running tasks the hook
asks PanDA to re-measure once their first jobs are settled (finished, or lost at
their maxAttempt), and that it asks once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from test_db_support import (
    LONG_AGO,
    add_jobs,
    add_task,
    make_prediction,
    running_task,
    set_task,
    task_row,
)

from panda_predictor.core.replay.panda_rules import EARLY_REMEASURE_AFTER
from panda_predictor.db.early_remeasure import (
    due_tasks,
    early_remeasure_table,
    run_early_remeasure,
)
from panda_predictor.db.engine import dialect_of
from panda_predictor.db.writer import write_predictions


def _asked(db, settings) -> dict[int, int]:
    table = early_remeasure_table(settings.plugin_schema_for(dialect_of(db)))
    with db.connect() as conn:
        rows = conn.execute(
            sa.select(table.c.jeditaskid, table.c.finished_jobs).where(
                table.c.asked_at.is_not(None)
            )
        )
        return {int(task_id): int(n) for task_id, n in rows}


def _marked(db, settings) -> list[int]:
    table = early_remeasure_table(settings.plugin_schema_for(dialect_of(db)))
    with db.connect() as conn:
        return sorted(
            int(i) for i in conn.execute(sa.select(table.c.jeditaskid)).scalars()
        )


def test_a_task_that_skipped_its_scouts_is_asked_once_after_its_first_jobs(
    db, settings
):
    for task_id, finished in ((1, 2), (2, 3), (3, 4), (4, 5), (5, 9)):
        running_task(db, settings, task_id, finished)
    before = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=1)

    result = run_early_remeasure(db, settings)

    # From the scouts' count (3) up to PanDA's own first point (5, its own rule).
    assert EARLY_REMEASURE_AFTER == 3
    assert result.asked == [2, 3] and result.locked_by_jedi == []
    for task_id in (2, 3):
        row = task_row(db, settings, task_id)
        assert row["walltimeunit"] is None  # PanDA's marker: re-measurement due
        assert row["modificationtime"] >= before  # its watchdog looks at the last 24 h
        assert row["walltime"] == 100  # our value stays until PanDA's replaces it
    for task_id in (1, 4, 5):
        row = task_row(db, settings, task_id)
        assert row["walltimeunit"] == "kSI2kseconds"
        assert row["modificationtime"] == LONG_AGO
    assert _asked(db, settings) == {2: 3, 3: 4}

    # PanDA re-measures and sets the unit back; a sixth job finishes elsewhere.
    set_task(db, settings, 2, walltimeunit="kSI2kseconds")
    add_jobs(db, settings, 1, 1)  # task 1 now has its third finished job

    again = run_early_remeasure(db, settings)

    assert again.asked == [1]  # task 2 is never asked twice
    assert task_row(db, settings, 2)["walltimeunit"] == "kSI2kseconds"
    assert _asked(db, settings) == {1: 3, 2: 3, 3: 4}


def test_the_writer_marks_only_tasks_written_the_scouts_values(db, settings):
    for task_id in range(1, 6):
        add_task(db, settings, task_id)
    set_task(db, settings, 5, status="running")  # JEDI moved it on: not written

    result = write_predictions(
        db,
        settings,
        [
            make_prediction(1, early_remeasure=True),  # the scouts' own values
            make_prediction(2),  # the model's own values: kept until PanDA's 5
            make_prediction(3, decision="kept_scouts", early_remeasure=True),
            make_prediction(4, decision="shadow", early_remeasure=True),
            make_prediction(5, early_remeasure=True),
        ],
    )

    assert result.applied == [1, 2] and result.moved_by_jedi == [5]
    assert _marked(db, settings) == [1]


def test_the_refiner_s_audit_marks_a_task_it_wrote(db, settings):
    from panda_predictor.db.audit_writer import write_audit

    write_audit(db, settings, make_prediction(1, early_remeasure=True), written=True)
    write_audit(db, settings, make_prediction(2, early_remeasure=True), written=False)
    write_audit(db, settings, make_prediction(3), written=True)

    assert _marked(db, settings) == [1]


def test_only_marked_running_tasks_jedi_does_not_hold_are_asked(db, settings):
    running_task(db, settings, 1, 3)  # the one to ask
    running_task(db, settings, 2, 3, lockedby="jedi-worker")  # JEDI holds it
    running_task(db, settings, 3, 3, walltimeunit=None)  # already due in PanDA
    running_task(db, settings, 4, 3, status="scouting")  # not running yet
    add_task(db, settings, 5, modificationtime=LONG_AGO)
    write_predictions(db, settings, [make_prediction(5)])  # the model's values
    set_task(db, settings, 5, status="running")
    add_jobs(db, settings, 5, 3)

    with db.connect() as conn:
        due = due_tasks(conn, settings)

    assert due == {1: 3}
    assert run_early_remeasure(db, settings).asked == [1]
    assert task_row(db, settings, 2)["walltimeunit"] == "kSI2kseconds"
    assert task_row(db, settings, 5)["walltimeunit"] == "kSI2kseconds"


def test_finished_jobs_are_counted_in_the_archive_too_and_failed_ones_not(db, settings):
    running_task(db, settings, 1, 1)
    add_jobs(db, settings, 1, 2, archive=True)  # moved to PanDA's archive
    running_task(db, settings, 2, 2)
    add_jobs(db, settings, 2, 4, status="failed", archive=True)  # retried

    with db.connect() as conn:
        due = due_tasks(conn, settings)

    assert due == {1: 3}


def test_a_job_lost_at_its_max_attempt_counts_as_settled_as_a_scout_does(db, settings):
    # 2 finished and 1 lost for good: 3 settled, as a scouted task whose third
    # scout was lost is measured from the other two.
    running_task(db, settings, 1, 2)
    add_jobs(db, settings, 1, 1, status="failed", attempt=3)
    # 2 finished and a failure JEDI still retries (attempt 2 of 3): not yet.
    running_task(db, settings, 2, 2)
    add_jobs(db, settings, 2, 1, status="failed", attempt=2)
    # 3 lost and none finished: nothing for PanDA to measure yet.
    running_task(db, settings, 3, 0)
    add_jobs(db, settings, 3, 3, status="failed", attempt=3, archive=True)

    with db.connect() as conn:
        due = due_tasks(conn, settings)
    assert due == {1: 2}

    run_early_remeasure(db, settings)
    assert _asked(db, settings) == {1: 2}
    assert task_row(db, settings, 1)["walltimeunit"] is None

    add_jobs(db, settings, 3, 1)  # task 3's first finished job
    assert run_early_remeasure(db, settings).asked == [3]


def test_a_task_moved_on_between_the_read_and_the_write_is_left_alone(db, settings):
    from panda_predictor.db.early_remeasure import ask_remeasure

    running_task(db, settings, 1, 3)
    running_task(db, settings, 2, 3)
    with db.connect() as conn:
        due = due_tasks(conn, settings)
    set_task(db, settings, 2, status="finishing")  # JEDI moved it on meanwhile

    result = ask_remeasure(db, settings, due)

    assert result.asked == [1]
    assert task_row(db, settings, 2)["walltimeunit"] == "kSI2kseconds"
    assert _asked(db, settings) == {1: 3}
