"""Ask PanDA to re-measure a task that skipped its scouts once its first jobs settled.

Why: a scouted task runs its 3 scouts, PanDA measures them, and every later job asks
for that measurement. A task that skipped its scouts runs on the values we wrote
until PanDA re-measures it, which PanDA does for every running task only after 5
(and 100) finished jobs (``job_complex_module.propagateResultToJEDI``). So its jobs 4
and 5 ran on a prediction where a scouted task's ran on a measurement: on the job
logs those jobs held most of the waste the product had over the scouts
(docs/evaluation.md). Asking for the re-measurement once
:data:`~panda_predictor.core.replay.panda_rules.EARLY_REMEASURE_AFTER` (3) jobs are
settled gives every later job what the scouts would have given it, without the
wait.

How: PanDA's own request, as its retry module makes it
(``DBProxy.requestTaskParameterRecalculation``): the task's ``WALLTIMEUNIT`` is set
to NULL and its ``MODIFICATIONTIME`` to now; JEDI's watchdog
(``setScoutJobDataToTasks_JEDI``, "set scout job data w/o scouts") then recomputes
ramCount, cpuTime, walltime, ... from the task's finished jobs with the scouts'
formulas, unless a unit ends in ``Fixed``. The plugin computes no value here.

Which tasks: those the decision wrote the scouts' own first values
(:attr:`~panda_predictor.core.domain.task_prediction.TaskPrediction.early_remeasure`:
the request, else the default, on every target PanDA re-measures), and every
applied task where a target writes its scouts' value for all tasks (PanDA
re-measures a task whole). They skipped their scouts with nothing better than
their first value, so they are re-measured where the scouts would have been; a
task written the model's own values otherwise keeps them until PanDA's
re-measurement after 5 jobs (on the job logs, re-measuring every task early cost
more failed jobs than it saved hours: docs/decisions.md). Only a champion
whose training chose it marks any (the ``early_remeasure`` setting: off by
default, since on the job logs it trades failed jobs and savings for hours;
"auto" lets each training choose it on its validation part; docs/decisions.md).
The writer marks
such a task in ``pp_early_remeasure`` when it writes it (:func:`mark_written`,
``sql/<dialect>/plugin/0005_early_remeasure.sql``); a pass asks for a marked task
once it is ``running``, not held by JEDI (``LOCKEDBY`` NULL), its ``WALLTIMEUNIT``
set, once :data:`EARLY_REMEASURE_AFTER` of its jobs are settled in JOBSARCHIVED4
(UNION JOBSARCHIVED): finished, or failed at their file's maxAttempt (lost, no
retry follows), as a scouted task's scouts are settled when PanDA measures them.
At least one must have finished (PanDA measures the finished jobs) and fewer than
PanDA's own first point (5). It records when (``asked_at``), so PanDA setting the
unit back after its re-measurement does not start another.

One short transaction per batch: the tasks are read ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL and Oracle (a row JEDI holds is left for the next pass, never waited
for), updated with a conditional UPDATE that checks status, LOCKEDBY and the unit
again, and recorded. Every statement carries a ``/* early_remeasure.* */`` tag.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy import BigInteger, Column, DateTime, Integer, MetaData, String, Table
from sqlalchemy.engine import Connection, Engine

from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.core.replay.panda_rules import (
    DEFAULT_REMEASURE_AFTER,
    EARLY_REMEASURE_AFTER,
)
from panda_predictor.db.engine import dialect_of, get_panda_tables
from panda_predictor.db.job_archive import archive_exists, job_rows
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

#: Task ids per IN list (Oracle allows 1,000).
IN_LIST = 1000

#: The only status a task is asked in: its jobs run (scouting tasks measure anyway).
RUNNING = "running"
#: The decision of a task whose values are written (scouts skipped).
APPLIED = "applied"


@lru_cache(maxsize=8)
def early_remeasure_table(schema: str | None) -> Table:
    """Describe ``pp_early_remeasure`` in ``schema`` (0005_early_remeasure.sql)."""
    return Table(
        "pp_early_remeasure",
        MetaData(schema=schema),
        Column("jeditaskid", BigInteger, primary_key=True, autoincrement=False),
        Column("marked_at", DateTime, nullable=False),
        Column("asked_at", DateTime),
        Column("finished_jobs", Integer),
        Column("host", String(128)),
    )


@dataclass
class EarlyRemeasureResult:
    """What one pass did: the tasks asked, and those JEDI held (asked next pass)."""

    asked: list[int] = field(default_factory=list)
    locked_by_jedi: list[int] = field(default_factory=list)


def due_tasks(
    conn: Connection, settings: Settings, limit: int | None = None
) -> dict[int, int]:
    """Return the tasks due for an early re-measurement, with their finished jobs.

    Due: at least :data:`EARLY_REMEASURE_AFTER` jobs settled (the point a scouted
    task's scouts are measured at), at least one of them finished (PanDA measures
    the finished ones), and fewer than PanDA's own first point (5) finished.

    :param conn: a connection to the database holding PanDA's and the plugin's
        tables.
    :param settings: the schemas.
    :param limit: at most this many candidates are looked at, lowest JEDITASKID
        first (None: all).
    """
    dialect = dialect_of(conn)
    tasks = get_panda_tables(settings, conn).jedi_tasks
    marked = early_remeasure_table(settings.plugin_schema_for(dialect))
    query = (
        sa.select(tasks.c.jeditaskid)
        .join(marked, marked.c.jeditaskid == tasks.c.jeditaskid)
        .where(
            marked.c.asked_at.is_(None),
            tasks.c.status == RUNNING,
            tasks.c.lockedby.is_(None),
            tasks.c.walltimeunit.is_not(None),
        )
        .order_by(tasks.c.jeditaskid)
        .limit(limit)
    )
    candidates = [int(i) for i in conn.execute(_tag(query, "due_tasks")).scalars()]
    first_own = DEFAULT_REMEASURE_AFTER[0]
    return {
        task_id: jobs.finished
        for task_id, jobs in settled_jobs(conn, settings, candidates).items()
        if jobs.settled >= EARLY_REMEASURE_AFTER and 1 <= jobs.finished < first_own
    }


class SettledJobs(NamedTuple):
    """A task's jobs that are done for good: finished, or lost."""

    finished: int
    #: Finished, plus failed at their file's maxAttempt (no retry follows).
    settled: int


def settled_jobs(
    conn: Connection, settings: Settings, task_ids: Sequence[int]
) -> dict[int, SettledJobs]:
    """Return per task of ``task_ids`` its settled jobs (tasks with none left out).

    A failed job is lost when its ATTEMPTNR reached its MAXATTEMPT: JEDI retries
    the file no more. A failed job below it is not settled: its retry, a new job,
    still runs (where PanDA's retry module ended the file earlier, the task waits
    for one job more, as if the file were retried).
    """
    tables = get_panda_tables(settings, conn)
    with_archive = archive_exists(conn, tables)
    counts: dict[int, SettledJobs] = {}
    for chunk in _chunks(list(task_ids)):

        def settled_of(table: sa.Table, ids: list[int] = chunk) -> list[Any]:
            lost = sa.and_(
                table.c.jobstatus == "failed",
                table.c.attemptnr >= table.c.maxattempt,
            )
            return [
                table.c.jeditaskid.in_(ids),
                sa.or_(table.c.jobstatus == "finished", lost),
            ]

        jobs = job_rows(
            tables, with_archive, settled_of, ("pandaid", "jeditaskid", "jobstatus")
        )
        finished = sa.func.sum(sa.case((jobs.c.jobstatus == "finished", 1), else_=0))
        query = sa.select(jobs.c.jeditaskid, finished, sa.func.count()).group_by(
            jobs.c.jeditaskid
        )
        for task_id, n_finished, n_settled in conn.execute(_tag(query, "settled")):
            counts[int(task_id)] = SettledJobs(int(n_finished), int(n_settled))
    return counts


def ask_remeasure(
    engine: Engine, settings: Settings, due: dict[int, int]
) -> EarlyRemeasureResult:
    """Ask PanDA to re-measure the ``due`` tasks (id -> finished jobs), in one
    transaction; a task JEDI holds or moved on meanwhile is left as it is."""
    result = EarlyRemeasureResult()
    if not due:
        return result
    dialect = dialect_of(engine)
    now = datetime.now(UTC).replace(tzinfo=None)
    host = socket.gethostname()[:128]
    with engine.begin() as conn:
        tasks = get_panda_tables(settings, conn).jedi_tasks
        asked_table = early_remeasure_table(settings.plugin_schema_for(dialect))
        ids = sorted(due)
        free = _lock_free_rows(conn, tasks, ids, lock=dialect != "sqlite")
        result.locked_by_jedi = [i for i in ids if i not in free]
        update = (
            tasks.update()
            .where(
                tasks.c.jeditaskid == sa.bindparam("task_id"),
                tasks.c.status == RUNNING,
                tasks.c.lockedby.is_(None),
                tasks.c.walltimeunit.is_not(None),
            )
            .values(walltimeunit=None, modificationtime=sa.bindparam("now"))
        )
        for task_id in sorted(free):
            done = conn.execute(
                _tag(update, "ask_remeasure"), {"task_id": task_id, "now": now}
            )
            if done.rowcount == 1:
                result.asked.append(task_id)
        record = (
            asked_table.update()
            .where(asked_table.c.jeditaskid == sa.bindparam("task_id"))
            .values(
                asked_at=now,
                finished_jobs=sa.bindparam("finished"),
                host=host,
            )
        )
        if result.asked:
            conn.execute(
                _tag(record, "ask_remeasure"),
                [{"task_id": i, "finished": due[i]} for i in result.asked],
            )
    if result.asked:
        log.info(
            "asked PanDA to re-measure %d tasks after their first %d settled jobs: "
            "jediTaskID=%s",
            len(result.asked),
            EARLY_REMEASURE_AFTER,
            ",".join(map(str, result.asked)),
        )
    return result


def mark_written(
    conn: Connection,
    settings: Settings,
    predictions: Sequence[TaskPrediction],
    written: Collection[int],
) -> list[int]:
    """Mark the ``written`` tasks of ``predictions`` whose decision asks for an
    early re-measurement, in the caller's transaction; return their ids.

    Called by the writers in the transaction that writes the values, so a task is
    marked if and only if its values were written.
    """
    return mark_tasks(
        conn,
        settings,
        [
            p.jeditaskid
            for p in predictions
            if p.early_remeasure and p.decision == APPLIED and p.jeditaskid in written
        ],
    )


def mark_tasks(
    conn: Connection, settings: Settings, task_ids: Sequence[int]
) -> list[int]:
    """Mark ``task_ids`` for an early re-measurement in the caller's transaction;
    return the ids marked now (a task marked before keeps its first mark).

    The message route (:mod:`panda_predictor.plugins.ai_parameter_adjuster`) calls
    it for the messages it applied with ``early_remeasure`` true; a task already
    marked is left out rather than inserted twice, so a second mark can never
    roll back the batch that carries it.
    """
    table = early_remeasure_table(settings.plugin_schema_for(dialect_of(conn)))
    wanted = sorted(set(task_ids))
    marked: set[int] = set()
    for chunk in _chunks(wanted):
        query = sa.select(table.c.jeditaskid).where(table.c.jeditaskid.in_(chunk))
        marked.update(int(i) for i in conn.execute(_tag(query, "mark")).scalars())
    ids = [i for i in wanted if i not in marked]
    if ids:
        now = datetime.now(UTC).replace(tzinfo=None)
        host = socket.gethostname()[:128]
        conn.execute(
            _tag(table.insert(), "mark"),
            [{"jeditaskid": i, "marked_at": now, "host": host} for i in ids],
        )
    return ids


def run_early_remeasure(
    engine: Engine, settings: Settings, batch: int | None = None
) -> EarlyRemeasureResult:
    """Find the due tasks and ask for their re-measurement, ``batch`` at a time."""
    batch = batch or settings.hook_batch_size
    with engine.connect() as conn:
        due = due_tasks(conn, settings)
    result = EarlyRemeasureResult()
    ids = sorted(due)
    for start in range(0, len(ids), batch):
        part = {i: due[i] for i in ids[start : start + batch]}
        done = ask_remeasure(engine, settings, part)
        result.asked += done.asked
        result.locked_by_jedi += done.locked_by_jedi
    return result


def _lock_free_rows(
    conn: Connection, tasks: sa.Table, ids: list[int], lock: bool
) -> set[int]:
    """Return which of ``ids`` this transaction could read (and, with ``lock``, lock
    in id order, skipping the rows another transaction locks)."""
    free: set[int] = set()
    for chunk in _chunks(ids):
        query = (
            sa.select(tasks.c.jeditaskid)
            .where(tasks.c.jeditaskid.in_(chunk))
            .order_by(tasks.c.jeditaskid)
        )
        if lock:
            query = query.with_for_update(skip_locked=True)
        rows = conn.execute(_tag(query, "ask_remeasure")).scalars()
        free.update(int(task_id) for task_id in rows)
    return free


def _chunks(ids: list[int]) -> list[list[int]]:
    """Return ``ids`` in lists of at most :data:`IN_LIST`."""
    return [ids[i : i + IN_LIST] for i in range(0, len(ids), IN_LIST)]


def _tag(statement: Any, name: str) -> Any:
    return statement.prefix_with(f"/* early_remeasure.{name} */", dialect="*")
