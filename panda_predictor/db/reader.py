"""Read tasks, their input-dataset aggregates and their job records from PanDA's tables.

Every query carries the task ids (or a task-id range), so PanDA's tables, partitioned
by JEDITASKID, are pruned to the partitions that matter. Column names in the returned
frames are the lower-case names of :mod:`panda_predictor.db.tables`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from panda_predictor.db.engine import (
    dialect_of,
    get_panda_tables,
    get_plugin_tables,
    translate_errors,
)
from panda_predictor.db.job_archive import archive_exists, job_rows
from panda_predictor.db.job_inputs import contents_exist, inputs_per_job, with_inputs
from panda_predictor.db.tables import PandaTables
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

#: Dataset types that count as a task's input.
INPUT_TYPES = ("input", "pseudo_input")
#: Statuses in which JEDI has not generated jobs yet, so scouts can still be skipped.
ELIGIBLE_STATUSES = ("defined", "ready")
#: Names of the dataset aggregates added to each task row.
AGGREGATE_COLUMNS = ("n_input_datasets", "nfiles_sum", "nevents_sum")
#: Oracle accepts at most 1000 values in an IN list.
_IN_LIST_LIMIT = 1000
_ID_COLUMNS = ("jeditaskid", "pandaid", "datasetid")


def _tag(query: Any, name: str) -> Any:
    """Put the ``/* module.function */`` tag a DBA uses to find the caller."""
    return query.prefix_with(f"/* {name} */", dialect="*")


def _task_query(tables: PandaTables, task_filter: Any, tag: str) -> sa.Select:
    """Return the select of tasks joined to their input-dataset aggregates."""
    t, d = tables.jedi_tasks, tables.jedi_datasets
    agg = (
        sa.select(
            d.c.jeditaskid,
            sa.func.count().label("n_input_datasets"),
            sa.func.sum(d.c.nfiles).label("nfiles_sum"),
            sa.func.sum(d.c.nevents).label("nevents_sum"),
        )
        .where(task_filter(d.c.jeditaskid), d.c.type.in_(INPUT_TYPES))
        .group_by(d.c.jeditaskid)
        .subquery("agg")
    )
    query = (
        sa.select(
            *t.c,
            sa.func.coalesce(agg.c.n_input_datasets, 0).label("n_input_datasets"),
            agg.c.nfiles_sum,
            agg.c.nevents_sum,
        )
        .select_from(t.outerjoin(agg, agg.c.jeditaskid == t.c.jeditaskid))
        .where(task_filter(t.c.jeditaskid))
        .order_by(t.c.jeditaskid)
    )
    return _tag(query, tag)


def _frame(rows: Sequence[Any], keys: list[str], table: sa.Table) -> pd.DataFrame:
    """Build a frame with stable dtypes: ids int64, numbers float64 (NaN for NULL)."""
    frame = pd.DataFrame.from_records(list(rows), columns=keys)
    for name in keys:
        column = table.c.get(name)
        if name in _ID_COLUMNS and frame[name].notna().all():
            frame[name] = frame[name].astype("int64")
        elif name in AGGREGATE_COLUMNS or (
            column is not None and isinstance(column.type, sa.Integer | sa.Numeric)
        ):
            frame[name] = frame[name].astype("float64")
        elif column is not None and isinstance(column.type, sa.DateTime):
            frame[name] = pd.to_datetime(frame[name])
    if "n_input_datasets" in frame:
        frame["n_input_datasets"] = frame["n_input_datasets"].astype("int64")
    return frame


def _chunks(values: Sequence[int], size: int) -> Iterator[Sequence[int]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class _connection:
    """Use a given connection as is, or open (and close) one from an engine."""

    def __init__(self, bind: Connection | Engine):
        self._bind = bind
        self._opened: Connection | None = None

    def __enter__(self) -> Connection:
        if isinstance(self._bind, Connection):
            return self._bind
        self._opened = self._bind.connect()
        return self._opened

    def __exit__(self, *exc: object) -> None:
        if self._opened is not None:
            self._opened.close()


def read_task_features(
    conn_or_engine: Connection | Engine, settings: Settings, task_ids: Iterable[int]
) -> pd.DataFrame:
    """Return the JEDI_TASKS rows of ``task_ids`` with their input-dataset aggregates.

    Adds ``n_input_datasets`` (0 for a task without input datasets) and
    ``nfiles_sum``/``nevents_sum`` (NaN when there are none or all are NULL); tasks
    not found are simply absent. Rows are ordered by ``jeditaskid``.

    Parameters
    ----------
    conn_or_engine:
        Where to read; a connection keeps the caller's transaction.
    settings:
        Settings naming the PanDA schema.
    task_ids:
        JEDITASKIDs to read.
    """
    ids = sorted({int(task_id) for task_id in task_ids})
    tables = get_panda_tables(settings, conn_or_engine)
    rows: list[Any] = []
    keys = [*tables.jedi_tasks.c.keys(), *AGGREGATE_COLUMNS]
    with translate_errors(conn_or_engine), _connection(conn_or_engine) as conn:
        for chunk in _chunks(ids, _IN_LIST_LIMIT):
            query = _task_query(
                tables, lambda col, c=chunk: col.in_(c), "reader.read_task_features"
            )
            rows.extend(conn.execute(query).all())
    return _frame(rows, keys, tables.jedi_tasks)


def find_eligible_tasks(
    conn: Connection,
    settings: Settings,
    limit: int,
    task_ids: Iterable[int] | None = None,
    lock: bool = False,
    after_id: int | None = None,
) -> list[int]:
    """Return ids of tasks still waiting for scouts that the plugin has not handled.

    A task is eligible when its status is ``defined`` or ``ready``, its SPLITRULE
    holds ``US=2`` (JEDI will run scouts; the exact rule, the first ``US=<digits>``,
    is checked by the writer), JEDI does not hold it (``LOCKEDBY`` is NULL) and it
    has no row in ``pp_prediction_audit``. A pass pages with ``after_id`` so a task
    it could not finish (JEDI took it meanwhile, a failed write) is not met again in
    the same pass and never holds back the tasks after it.

    Parameters
    ----------
    conn:
        Connection inside the caller's transaction (locks last until it ends).
    settings:
        Settings naming the PanDA and plugin schemas.
    limit:
        At most this many ids, lowest first.
    task_ids:
        Only consider these tasks (default: all).
    lock:
        Lock the returned rows with ``FOR UPDATE SKIP LOCKED`` (PostgreSQL, Oracle)
        until the caller's transaction ends. The hook does not: it predicts outside
        any lock and writes with a conditional update (see ``db.writer``).
    after_id:
        Only tasks with a larger JEDITASKID (keyset paging within one pass).
    """
    if limit <= 0:
        raise ValueError(
            f"The 'limit' field must be a positive integer. Got {limit!r} instead."
        )
    t = get_panda_tables(settings, conn).jedi_tasks
    audit = get_plugin_tables(settings, conn).audit
    dialect = dialect_of(conn)
    conditions: list[Any] = [
        t.c.status.in_(ELIGIBLE_STATUSES),
        # Necessary for PanDA's reading (first US=<digits> is 2, core.domain.splitrule);
        # the writer checks the exact rule on the locked row.
        t.c.splitrule.like("%US=2%"),
        t.c.lockedby.is_(None),
        ~sa.exists().where(audit.c.jeditaskid == t.c.jeditaskid),
    ]
    if after_id is not None:
        conditions.append(t.c.jeditaskid > int(after_id))
    if task_ids is not None:
        ids = sorted({int(task_id) for task_id in task_ids})
        if not ids:
            return []
        conditions.append(
            sa.or_(
                *(t.c.jeditaskid.in_(chunk) for chunk in _chunks(ids, _IN_LIST_LIMIT))
            )
        )
    query = sa.select(t.c.jeditaskid).where(*conditions).order_by(t.c.jeditaskid)
    if dialect == "oracle" and lock:
        # Oracle refuses FOR UPDATE with FETCH FIRST; ROWNUM limits before locking
        # and before ORDER BY, so Oracle returns any `limit` eligible tasks.
        query = query.where(
            sa.literal_column("ROWNUM") <= sa.bindparam("row_limit", limit)
        )
    else:
        query = query.limit(limit)
    if lock and dialect in ("postgresql", "oracle"):
        query = query.with_for_update(skip_locked=True)
    query = _tag(query, "reader.find_eligible_tasks")
    with translate_errors(conn):
        return [int(task_id) for task_id in conn.execute(query).scalars()]


def iter_history(
    engine: Engine | Connection,
    settings: Settings,
    chunk_size: int = 500,
    since: datetime | None = None,
    until: datetime | None = None,
    with_jobs: bool = True,
) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """Yield ``(tasks, jobs)`` frames, ``chunk_size`` tasks at a time, in task-id order.

    ``tasks`` holds JEDI_TASKS rows with the input-dataset aggregates (as
    :func:`read_task_features`), ``jobs`` the JOBSARCHIVED4 rows of those tasks. Each
    chunk is found by keyset paging on JEDITASKID and every job query carries the
    chunk's task-id range, so memory stays bounded and partitions are pruned.

    Parameters
    ----------
    engine:
        Where to read.
    settings:
        Settings naming the PanDA schema.
    chunk_size:
        Tasks per chunk.
    since, until:
        Only tasks whose CREATIONDATE is ``>= since`` and ``< until``.
    with_jobs:
        Read the jobs too; without them ``jobs`` is empty (labels computed
        elsewhere, e.g. on Spark).
    """
    if chunk_size <= 0:
        raise ValueError(
            f"The 'chunk_size' field must be a positive integer. "
            f"Got {chunk_size!r} instead."
        )
    tables = get_panda_tables(settings, engine)
    t, j = tables.jedi_tasks, tables.jobsarchived4
    period: list[Any] = []
    if since is not None:
        period.append(t.c.creationdate >= since)
    if until is not None:
        period.append(t.c.creationdate < until)
    dialect = dialect_of(engine)
    with translate_errors(engine):
        with_archive = with_jobs and archive_exists(engine, tables)
        with_contents = with_jobs and contents_exist(engine, tables)
    last_id: int | None = None
    while True:
        with translate_errors(engine), _connection(engine) as conn:
            ids = _next_task_ids(conn, t, period, chunk_size, last_id)
            if not ids:
                return
            low, high = int(ids[0]), int(ids[-1])
            tasks = _history_tasks(conn, tables, period, (low, high))
            if with_jobs:
                jobs = _history_jobs(
                    conn,
                    tables,
                    dialect,
                    period,
                    (low, high),
                    with_archive,
                    with_contents,
                )
            else:  # labels come from elsewhere: no job query at all
                jobs = _frame([], [c.name for c in j.columns], j)
        log.debug(
            "History chunk jediTaskID=%d..%d: %d tasks, %d jobs",
            low,
            high,
            len(tasks),
            len(jobs),
        )
        yield tasks, jobs
        last_id = high


def _next_task_ids(
    conn: Connection,
    t: sa.Table,
    period: list[Any],
    chunk_size: int,
    last_id: int | None,
) -> list[int]:
    """Return the next ``chunk_size`` task ids after ``last_id`` (keyset paging)."""
    page = sa.select(t.c.jeditaskid).where(*period).order_by(t.c.jeditaskid)
    page = page.limit(chunk_size)
    if last_id is not None:
        page = page.where(t.c.jeditaskid > last_id)
    return list(conn.execute(_tag(page, "reader.iter_history")).scalars())


def _history_tasks(
    conn: Connection,
    tables: PandaTables,
    period: list[Any],
    id_range: tuple[int, int],
) -> pd.DataFrame:
    """Return the tasks of one history chunk with their input-dataset aggregates."""
    low, high = id_range
    t = tables.jedi_tasks
    query = _task_query(
        tables, lambda col: col.between(low, high), "reader.iter_history"
    )
    if period:
        query = query.where(*period)
    return _frame(conn.execute(query).all(), [*t.c.keys(), *AGGREGATE_COLUMNS], t)


def _history_jobs(
    conn: Connection,
    tables: PandaTables,
    dialect: str,
    period: list[Any],
    id_range: tuple[int, int],
    with_archive: bool,
    with_contents: bool,
) -> pd.DataFrame:
    """Return the jobs of one history chunk's tasks, with their master input.

    Every query carries the chunk's JEDITASKID range so the job tables' partitions
    are pruned.
    """
    low, high = id_range
    t = tables.jedi_tasks

    def in_range(col: Any) -> Any:
        return col.between(low, high)

    chosen = sa.select(t.c.jeditaskid).where(in_range(t.c.jeditaskid), *period)

    def picked(table: sa.Table) -> list[Any]:
        return [in_range(table.c.jeditaskid), table.c.jeditaskid.in_(chosen)]

    def picked_files(table: sa.Table) -> list[Any]:
        return [in_range(table.c.jeditaskid)]

    rows = job_rows(tables, with_archive, picked)
    inputs = inputs_per_job(tables, dialect, picked_files) if with_contents else None
    query = _tag(
        with_inputs(rows, inputs).order_by(rows.c.jeditaskid, rows.c.pandaid),
        "reader.iter_history",
    )
    result = conn.execute(query)
    return _frame(result.all(), list(result.keys()), tables.jobsarchived4)


def find_changed_tasks(
    bind: Engine | Connection,
    settings: Settings,
    since: datetime,
    created_since: datetime | None = None,
) -> list[int]:
    """Return ids of tasks whose history row may have changed since ``since``.

    A task changed when JEDI touched it (``MODIFICATIONTIME``, which JEDI sets on
    every update of the task) or one of its jobs finished (``ENDTIME`` in
    JOBSARCHIVED4: new scout measurements, hence new labels). Both columns are
    indexed, so an idle pass reads two index ranges instead of the whole history.

    Parameters
    ----------
    bind:
        Where to read.
    settings:
        Settings naming the PanDA schema.
    since:
        Changes at or after this time count.
    created_since:
        Only tasks created at or after this time (the history window).
    """
    tables = get_panda_tables(settings, bind)
    t, j = tables.jedi_tasks, tables.jobsarchived4
    window: list[Any] = []
    if created_since is not None:
        window.append(t.c.creationdate >= created_since)
    touched = _tag(
        sa.select(t.c.jeditaskid).where(t.c.modificationtime >= since, *window),
        "reader.find_changed_tasks",
    )
    finished = sa.select(t.c.jeditaskid).where(
        t.c.jeditaskid.in_(
            sa.select(j.c.jeditaskid).where(j.c.endtime >= since).distinct()
        ),
        *window,
    )
    query = sa.union(touched, finished)
    with translate_errors(bind), _connection(bind) as conn:
        return sorted(int(task_id) for task_id in conn.execute(query).scalars())


def iter_task_history(
    bind: Engine | Connection,
    settings: Settings,
    task_ids: Iterable[int],
    chunk_size: int = 500,
) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """Yield ``(tasks, jobs)`` frames as :func:`iter_history` does, for given tasks.

    The incremental history read uses it to re-read only the tasks that changed;
    the frames have the same columns and types as those of :func:`iter_history`.
    """
    ids = sorted({int(task_id) for task_id in task_ids})
    tables = get_panda_tables(settings, bind)
    t, j = tables.jedi_tasks, tables.jobsarchived4
    task_keys = [*t.c.keys(), *AGGREGATE_COLUMNS]
    dialect = dialect_of(bind)
    with translate_errors(bind):
        with_archive = archive_exists(bind, tables)
        with_contents = contents_exist(bind, tables)
    for chunk in _chunks(ids, min(chunk_size, _IN_LIST_LIMIT)):
        with translate_errors(bind), _connection(bind) as conn:
            tasks_query = _task_query(
                tables, lambda col, c=chunk: col.in_(c), "reader.iter_task_history"
            )
            tasks = _frame(conn.execute(tasks_query).all(), task_keys, t)

            def picked(table: sa.Table, chunk: Sequence[int] = chunk) -> list[Any]:
                return [table.c.jeditaskid.in_(chunk)]

            rows = job_rows(tables, with_archive, picked)
            inputs = inputs_per_job(tables, dialect, picked) if with_contents else None
            jobs_query = _tag(
                with_inputs(rows, inputs).order_by(rows.c.jeditaskid, rows.c.pandaid),
                "reader.iter_task_history",
            )
            result = conn.execute(jobs_query)
            jobs = _frame(result.all(), list(result.keys()), j)
        yield tasks, jobs
