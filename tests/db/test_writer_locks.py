"""The write-back never waits for JEDI's row locks, on the real PostgreSQL server.

JEDI locks a task's row with ``SELECT ... FOR UPDATE`` while it works on it. The
writer reads its rows with ``SKIP LOCKED``: such a task is left for the next pass
(``locked_by_jedi``, no audit) and the rest of the batch is written at once. SQLite
has no row locks; the tests that need one run on PostgreSQL only: on the plugin's
test schema, and on PanDA's own DDL (build.sh) where JEDI's rows live.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest
import sqlalchemy as sa
from message_parts import insert_tasks, prediction, task
from test_db_support import (
    add_task,
    audit_rows,
    make_prediction,
    running_task,
    task_row,
)

from panda_predictor.db.early_remeasure import run_early_remeasure
from panda_predictor.db.engine import (
    DatabaseError,
    get_panda_tables,
    get_plugin_tables,
)
from panda_predictor.db.writer import write_predictions


@pytest.fixture(params=[pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_target(pg_schema) -> tuple[str, str]:
    """Run every test here on PostgreSQL only (SQLite has no row locks), never skip."""
    from conftest import POSTGRES_URL

    return POSTGRES_URL, pg_schema


def _jedi_locks(db, settings, task_id: int) -> sa.Connection:
    """Open JEDI's transaction holding ``task_id``'s row (``SELECT ... FOR UPDATE``)."""
    tasks = get_panda_tables(settings, db).jedi_tasks
    jedi = db.connect()
    jedi.begin()
    jedi.execute(
        sa.select(tasks.c.jeditaskid)
        .where(tasks.c.jeditaskid == task_id)
        .with_for_update()
    ).one()
    return jedi


def test_a_row_jedi_locks_is_skipped_without_waiting(db, settings):
    for task_id in (1, 2, 3):
        add_task(db, settings, task_id)
    before = task_row(db, settings, 2)
    # A lock timeout far above the bound: only skipping, not timing out, is fast.
    settings = settings.model_copy(update={"write_lock_timeout_seconds": 30.0})
    jedi = _jedi_locks(db, settings, 2)
    try:
        started = time.monotonic()
        result = write_predictions(
            db, settings, [make_prediction(i) for i in (1, 2, 3)]
        )
        elapsed = time.monotonic() - started
    finally:
        jedi.rollback()
        jedi.close()

    # Waiting for the lock would take the whole 30 s lock timeout (JEDI holds it
    # until the write returns) and then fail; a third of it leaves room for a
    # loaded machine without letting a wait pass.
    assert elapsed < 10.0, f"the write waited {elapsed:.2f} s for JEDI's lock"
    assert (result.applied, result.locked_by_jedi) == ([1, 3], [2])
    assert result.reasons[2].startswith("locked by JEDI: row locked by another")
    assert result.moved_by_jedi == [] and set(audit_rows(db, settings)) == {1, 3}
    assert task_row(db, settings, 2) == before
    # JEDI let go: the task is still eligible and the next write takes it.
    assert write_predictions(db, settings, [make_prediction(2)]).applied == [2]


def test_the_early_remeasurement_skips_a_row_jedi_locks_without_waiting(db, settings):
    for task_id in (1, 2, 3):
        running_task(db, settings, task_id, 3)
    jedi = _jedi_locks(db, settings, 2)
    try:
        started = time.monotonic()
        result = run_early_remeasure(db, settings)
        elapsed = time.monotonic() - started
    finally:
        jedi.rollback()
        jedi.close()

    assert elapsed < 10.0, f"the pass waited {elapsed:.2f} s for JEDI's lock"
    assert (result.asked, result.locked_by_jedi) == ([1, 3], [2])
    assert task_row(db, settings, 2)["walltimeunit"] == "kSI2kseconds"
    # JEDI let go: the next pass asks for it.
    assert run_early_remeasure(db, settings).asked == [2]
    assert task_row(db, settings, 2)["walltimeunit"] is None


def test_the_write_transaction_gets_the_lock_timeout(db, settings):
    add_task(db, settings, 1)
    settings = settings.model_copy(update={"write_lock_timeout_seconds": 1.5})
    with db.connect() as conn, conn.begin():
        write_predictions(conn, settings, [make_prediction(1)])
        inside = conn.execute(sa.text("SHOW lock_timeout")).scalar()
    with db.connect() as conn:
        after = conn.execute(sa.text("SHOW lock_timeout")).scalar()
    assert inside == "1500ms"
    assert after == "0"  # SET LOCAL: the setting ended with the transaction


def test_any_other_lock_is_waited_for_only_the_lock_timeout(db, settings):
    """Another writer's uncommitted audit row of the task: give up, write nothing."""
    add_task(db, settings, 1)
    add_task(db, settings, 2)
    settings = settings.model_copy(update={"write_lock_timeout_seconds": 0.2})
    audit = get_plugin_tables(settings, db).audit
    other = db.connect()
    other.begin()
    other.execute(
        sa.insert(audit),
        {
            "jeditaskid": 2,
            "model_name": "other",
            "model_version": "1",
            "decision": "kept_scouts",
            "predicted_at": datetime(2026, 12, 1),
            "host": "other",
        },
    )
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseError, match="lock timeout"):
            write_predictions(db, settings, [make_prediction(1), make_prediction(2)])
        elapsed = time.monotonic() - started
    finally:
        other.rollback()
        other.close()
    assert elapsed < 5.0
    assert audit_rows(db, settings) == {}
    assert task_row(db, settings, 1)["splitrule"] == "TI=1,US=2"


def test_a_jedi_like_writer_and_the_plugin_never_deadlock(db, settings, monkeypatch):
    """JEDI holds task 3 and then wants task 1, which the plugin holds.

    Were the plugin to wait for task 3, each would wait for the other. It skips
    task 3 instead, so it commits and JEDI's wait ends.
    """
    from panda_predictor.db import writer

    for task_id in (1, 2, 3):
        add_task(db, settings, task_id)
    tasks = get_panda_tables(settings, db).jedi_tasks
    jedi = _jedi_locks(db, settings, 3)
    jedi_done = threading.Event()
    jedi_error: list[BaseException] = []

    def jedi_takes_task_1() -> None:
        try:
            jedi.execute(
                sa.update(tasks)
                .where(tasks.c.jeditaskid == 1)
                .values(lockedby="JobGenerator")
            )
            jedi.commit()
        except Exception as exc:  # noqa: BLE001  reported by the assertion below
            jedi_error.append(exc)
        finally:
            jedi_done.set()

    read = writer._current_rows

    def read_then_jedi_moves(conn, table, ids, lock):
        rows = read(conn, table, ids, lock)  # the plugin now holds tasks 1 and 2
        threading.Thread(target=jedi_takes_task_1, daemon=True).start()
        time.sleep(0.2)  # JEDI is now waiting for task 1
        return rows

    monkeypatch.setattr(writer, "_current_rows", read_then_jedi_moves)
    try:
        result = write_predictions(
            db, settings, [make_prediction(i) for i in (1, 2, 3)]
        )
        assert jedi_done.wait(10), "JEDI still waits after the plugin committed"
    finally:
        jedi.close()

    assert jedi_error == []
    assert (result.applied, result.locked_by_jedi) == ([1, 2], [3])
    assert task_row(db, settings, 1)["lockedby"] == "JobGenerator"


def test_on_panda_s_own_ddl_a_task_jedi_holds_is_skipped_without_waiting(panda_ddl):
    """JEDI's ``SELECT ... FOR UPDATE NOWAIT`` holds task 2 of PanDA's real JEDI_TASKS.

    The hook's writer skips that row (reported locked, no audit row, untouched) and
    writes the two others at once, far below its lock timeout.
    """
    engine, settings = panda_ddl
    insert_tasks(engine, [1, 2, 3])
    before = task(engine, 2)
    settings = settings.model_copy(update={"write_lock_timeout_seconds": 30.0})
    with engine.connect() as jedi:
        jedi.begin()
        jedi.execute(
            sa.text(
                "SELECT jeditaskid FROM doma_panda.jedi_tasks WHERE jeditaskid = 2 "
                "FOR UPDATE NOWAIT"
            )
        ).one()
        started = time.monotonic()
        result = write_predictions(engine, settings, [prediction(i) for i in (1, 2, 3)])
        elapsed = time.monotonic() - started
        jedi.rollback()

    # A wait would last the whole 30 s lock timeout (JEDI holds the row until the
    # write returns) and then fail; a third of it leaves room for a loaded machine.
    assert elapsed < 10.0, f"the write waited {elapsed:.2f} s for JEDI's lock"
    assert (result.applied, result.locked_by_jedi) == ([1, 3], [2])
    assert result.reasons[2].startswith("locked by JEDI: row locked by another")
    assert task(engine, 2) == before
    for written in (1, 3):
        assert task(engine, written)["splitrule"] == "NG=1,TW=1"
    with engine.connect() as conn:
        audited = conn.execute(
            sa.text("SELECT jeditaskid FROM doma_panda.pp_prediction_audit")
        ).scalars()
        assert sorted(audited) == [1, 3]
    # JEDI let go: the task is still eligible and the next write takes it.
    assert write_predictions(engine, settings, [prediction(2)]).applied == [2]
