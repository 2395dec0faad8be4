"""The scout labels as one SQL aggregation, run where the job records live.

On PostgreSQL and Oracle the expensive part (filtering millions of JOBSARCHIVED4 rows
to the finished scouts, the per-job formulas, ``percentile_cont(...) WITHIN GROUP``
and the maxima per JEDITASKID) runs in the database; only one row per task comes back.
The last per-task step (margins, rounding, the units) reuses
:func:`~panda_predictor.core.label_values.finalize_labels`, so SQL and Python labels
round identically. SQLite has no ``percentile_cont``: there :func:`labels_from_db`
raises :class:`LabelsSqlUnsupported`; use
:func:`panda_predictor.core.labels.labels_frame` on the rows of
:func:`panda_predictor.db.reader.iter_history` instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from datetime import datetime

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.dialects import oracle
from sqlalchemy.engine import Connection, Engine
from tqdm import tqdm

from panda_predictor.core.label_values import (
    AGGREGATE_COLUMNS,
    DEFAULT_LABEL_PARAMS,
    RAM_FIXED_UNIT,
    RAM_PER_CORE_UNIT,
    LabelParams,
    labels_from_aggregates,
)
from panda_predictor.core.labels import BYTES_PER_INPUT_MB, JOB_COLUMNS
from panda_predictor.db.job_archive import archive_exists, job_rows
from panda_predictor.db.job_inputs import contents_exist, inputs_per_job, with_inputs
from panda_predictor.db.tables import PandaTables

log = logging.getLogger(__name__)

#: Dialects whose SQL has ``percentile_cont ... WITHIN GROUP``.
SUPPORTED_DIALECTS = ("postgresql", "oracle")
#: Oracle accepts at most 1000 expressions in an IN list.
MAX_IDS_PER_QUERY = 1000
_TAG = "/* panda_predictor.db.labels_sql.label_aggregates_query */"

_DOUBLE: sa.types.TypeEngine[float] = sa.Double().with_variant(
    oracle.BINARY_DOUBLE(), "oracle"
)


class LabelsSqlUnsupported(NotImplementedError):
    """The database's SQL cannot compute the labels; the message names the fallback."""


def _double(expr: sa.ColumnElement) -> sa.ColumnElement:
    return sa.cast(expr, _DOUBLE)


def _seconds_between(start: sa.ColumnElement, end: sa.ColumnElement, dialect: str):
    """Return the SQL for ``end - start`` in seconds on ``dialect``."""
    if dialect == "oracle":
        # DATE - DATE is in days on Oracle, for DATE and TIMESTAMP columns alike.
        return _double((sa.cast(end, sa.Date) - sa.cast(start, sa.Date)) * 86400)
    return _double(sa.extract("epoch", end - start))


def label_aggregates_query(
    tables: PandaTables,
    dialect: str,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
    by_range: bool = False,
    since: datetime | None = None,
    until: datetime | None = None,
    with_archive: bool = False,
    with_contents: bool = False,
) -> sa.Select:
    """Build the per-task aggregation over finished scouts for the task ids bound later.

    The statement takes one expanding bind parameter ``task_ids`` (or, with
    ``by_range``, the bounds ``low`` and ``high`` of a JEDITASKID range) and returns,
    per task in it (tasks without scouts included, with NULLs): ``jeditaskid``,
    ``ram_kb`` and ``cpu_per_event`` (the percentiles), ``io_kb_per_s``,
    ``max_cpu_s``, ``max_input_bytes``, ``n_scouts``, ``labels_known_at`` and the
    task's ``ramunit`` and ``cputimeunit``.

    Parameters
    ----------
    tables:
        PanDA's tables in the right schema.
    dialect:
        ``postgresql`` or ``oracle``.
    params:
        Constants of the formulas.
    by_range:
        Select the tasks by a JEDITASKID range instead of a list: one index range
        scan (and partition pruning, as PanDA partitions by JEDITASKID) per chunk.
        Ten times faster than lists of 1000 ids on PostgreSQL (docs/database.md).
    since, until:
        Only tasks created in ``[since, until)``. ``since`` also bounds the jobs'
        ENDTIME (a job ends after its task was created), which prunes
        JOBSARCHIVED4's day partitions.
    with_archive:
        Read the jobs from JOBSARCHIVED4 UNION JOBSARCHIVED, PanDA's archive, as
        ``getScoutJobData_JEDI`` does (:mod:`panda_predictor.db.job_archive`).
    with_contents:
        Take a job's events and master input size from its files in
        JEDI_DATASET_CONTENTS where it has some (:mod:`panda_predictor.db.job_inputs`).
    """
    if dialect not in SUPPORTED_DIALECTS:
        raise LabelsSqlUnsupported(
            f"The labels need SQL percentile_cont, which the {dialect!r} database "
            f"lacks; it works on {list(SUPPORTED_DIALECTS)}. Use "
            "panda_predictor.core.labels.labels_frame on the rows read by "
            "panda_predictor.db.reader.iter_history instead."
        )
    t = tables.jedi_tasks
    window = _creation_window(t, since, until)
    chosen = _task_choice(by_range)
    jobs = _finished_jobs(
        tables, dialect, params, chosen, since, with_archive, with_contents
    )
    scouts = _scouts(jobs, t, dialect, params, chosen, window)
    per_task = _per_task(scouts, params)
    return (
        sa.select(
            t.c.jeditaskid,
            per_task.c.ram_kb,
            per_task.c.cpu_per_event,
            per_task.c.io_kb_per_s,
            per_task.c.max_cpu_s,
            per_task.c.max_input_bytes,
            sa.func.coalesce(per_task.c.n_scouts, 0).label("n_scouts"),
            per_task.c.labels_known_at,
            t.c.ramunit,
            t.c.cputimeunit,
        )
        .select_from(t.outerjoin(per_task, per_task.c.jeditaskid == t.c.jeditaskid))
        .where(chosen(t.c.jeditaskid), *window)
        .order_by(t.c.jeditaskid)
        .prefix_with(_TAG)
    )


def _creation_window(
    t: sa.Table, since: datetime | None, until: datetime | None
) -> list[sa.ColumnElement[bool]]:
    """Return the conditions keeping the tasks created in ``[since, until)``."""
    return [
        *([t.c.creationdate >= since] if since is not None else []),
        *([t.c.creationdate < until] if until is not None else []),
    ]


def _task_choice(by_range: bool) -> Callable[[sa.ColumnElement], sa.ColumnElement]:
    """Return the condition on a JEDITASKID column that picks the tasks bound later.

    By a range (bind parameters ``low`` and ``high``) or by a list (``task_ids``).
    """

    def chosen(column: sa.ColumnElement) -> sa.ColumnElement:
        if by_range:
            return column.between(sa.bindparam("low"), sa.bindparam("high"))
        return column.in_(sa.bindparam("task_ids", expanding=True))

    return chosen


def _finished_jobs(
    tables: PandaTables,
    dialect: str,
    params: LabelParams,
    chosen: Callable[[sa.ColumnElement], sa.ColumnElement],
    since: datetime | None,
    with_archive: bool,
    with_contents: bool,
) -> sa.Subquery:
    """Return the chosen tasks' finished jobs, with their master input where known.

    The subquery ``jobs_with_inputs``: JOBSARCHIVED4 (and PanDA's archive) joined to
    the job's files in JEDI_DATASET_CONTENTS when ``with_contents``.
    """
    # The task ids, the status and the time bound inside each branch of the UNION.
    j = job_rows(
        tables,
        with_archive,
        lambda table: [
            chosen(table.c.jeditaskid),
            table.c.jobstatus == params.finished_status,
            *([table.c.endtime >= since] if since is not None else []),
        ],
        columns=("pandaid", *JOB_COLUMNS),
    )
    inputs = (
        inputs_per_job(tables, dialect, lambda table: [chosen(table.c.jeditaskid)])
        if with_contents
        else None
    )
    return with_inputs(j, inputs).subquery("jobs_with_inputs")


def _scouts(
    j: sa.Subquery,
    t: sa.Table,
    dialect: str,
    params: LabelParams,
    chosen: Callable[[sa.ColumnElement], sa.ColumnElement],
    window: list[sa.ColumnElement[bool]],
) -> sa.Subquery:
    """Return each scout job's figures (the subquery ``scouts``), PanDA's formulas.

    One row per finished scout of a chosen task: its memory, CPU time per event and
    I/O intensity, its CPU seconds, input bytes and end time.
    """
    # JobUtils.getCoreCount: ACTUALCORECOUNT, then the job's CORECOUNT, then 1.
    cores = _double(
        sa.case(
            (j.c.actualcorecount > 0, j.c.actualcorecount),
            (j.c.corecount > 0, j.c.corecount),
            else_=1,
        )
    )
    exec_s = _seconds_between(j.c.starttime, j.c.endtime, dialect)
    # The master input's files (JEDI_DATASET_CONTENTS) where known, else the job's.
    events = _double(sa.func.coalesce(j.c.master_nevents, j.c.nevents))
    job_input = sa.func.coalesce(
        _double(j.c.master_input_mb) * BYTES_PER_INPUT_MB, _double(j.c.inputfilebytes)
    )
    in_bytes = sa.func.coalesce(job_input, sa.literal(0.0, _DOUBLE))
    out_bytes = _double(sa.func.coalesce(j.c.outputfilebytes, 0))
    handling = (
        sa.literal(",")
        .concat(sa.func.replace(j.c.specialhandling, " ", ""))
        .concat(",")
    )
    return (
        sa.select(
            j.c.jeditaskid,
            _ram_kb(j, t, cores).label("ram_kb"),
            _cpu_per_event(j, t, params, exec_s, cores, events).label("cpu_per_event"),
            sa.case(
                (exec_s > 0, (in_bytes + out_bytes) / 1024.0 / exec_s / cores)
            ).label("io_kb_per_s"),
            _double(j.c.cpuconsumptiontime).label("cpu_s"),
            job_input.label("input_bytes"),
            j.c.endtime,
        )
        .select_from(j.join(t, j.c.jeditaskid == t.c.jeditaskid))
        .where(
            chosen(t.c.jeditaskid),
            handling.like(f"%,{params.scout_flag},%"),
            *window,
        )
        .subquery("scouts")
    )


def _ram_kb(j: sa.Subquery, t: sa.Table, cores: sa.ColumnElement) -> sa.ColumnElement:
    """Return a scout's memory in kB: per core above the base for ``MBPerCore``."""
    base_ram_kb = _double(sa.func.coalesce(t.c.baseramcount, 0)) * 1024.0
    pss = _double(j.c.maxpss)
    return sa.case(
        (
            sa.and_(j.c.maxpss > 0, t.c.ramunit == RAM_PER_CORE_UNIT),
            _double(sa.func.ceil((pss - base_ram_kb) / cores)),
        ),
        (
            sa.and_(
                j.c.maxpss > 0,
                sa.or_(t.c.ramunit.is_(None), t.c.ramunit != RAM_FIXED_UNIT),
            ),
            pss,
        ),
    )


def _cpu_per_event(
    j: sa.Subquery,
    t: sa.Table,
    params: LabelParams,
    exec_s: sa.ColumnElement,
    cores: sa.ColumnElement,
    events: sa.ColumnElement,
) -> sa.ColumnElement:
    """Return a scout's CPU time per event, NULL where the job cannot tell it.

    The busy seconds (beyond the task's base walltime) times the core power
    (HS06 seconds per second and core) and the CPU efficiency, per event.
    """
    efficiency = _double(
        sa.func.coalesce(t.c.cpuefficiency, params.default_cpu_efficiency)
    )
    base_wall = _double(
        sa.func.coalesce(t.c.basewalltime, params.default_base_walltime)
    )
    power = sa.case(
        (sa.and_(j.c.hs06sec > 0, exec_s > 0), _double(j.c.hs06sec) / (exec_s * cores)),
        else_=sa.literal(params.default_core_power, _DOUBLE),
    )
    usable = sa.and_(
        exec_s > 0,
        events > 0,
        sa.or_(
            sa.func.coalesce(j.c.pseudo_input, 0) > 0,
            events >= params.cpu_min_events_per_core * cores,
            exec_s > params.cpu_long_job_s,
        ),
    )
    busy = sa.func.greatest(exec_s - base_wall, sa.literal(0.0, _DOUBLE))
    return sa.case((usable, busy * power * cores * efficiency / 100.0 / events))


def _per_task(scouts: sa.Subquery, params: LabelParams) -> sa.Subquery:
    """Return the scouts' percentiles and maxima per task (subquery ``per_task``)."""
    return (
        sa.select(
            scouts.c.jeditaskid,
            sa.func.percentile_cont(params.ram_quantile)
            .within_group(scouts.c.ram_kb)
            .label("ram_kb"),
            sa.func.percentile_cont(params.cpu_quantile)
            .within_group(scouts.c.cpu_per_event)
            .label("cpu_per_event"),
            sa.func.max(scouts.c.io_kb_per_s).label("io_kb_per_s"),
            sa.func.max(scouts.c.cpu_s).label("max_cpu_s"),
            sa.func.max(scouts.c.input_bytes).label("max_input_bytes"),
            sa.func.count().label("n_scouts"),
            sa.func.max(scouts.c.endtime).label("labels_known_at"),
        )
        .group_by(scouts.c.jeditaskid)
        .subquery("per_task")
    )


def labels_from_db(
    bind: Engine | Connection,
    tables: PandaTables,
    task_ids: Sequence[int],
    params: LabelParams = DEFAULT_LABEL_PARAMS,
) -> pd.DataFrame:
    """Compute the labels of ``task_ids`` in the database, as ``labels_frame`` does.

    Tasks missing from JEDI_TASKS give no row; tasks without scouts give NaN labels.

    Parameters
    ----------
    bind:
        Engine or connection of a PostgreSQL or Oracle PanDA database.
    tables:
        PanDA's tables in the right schema (``get_panda_tables(settings, bind)``).
    task_ids:
        JEDITASKIDs to label (queried in batches of 1000).
    params:
        Constants of the formulas.
    """
    query = label_aggregates_query(
        tables,
        bind.dialect.name,
        params,
        with_archive=archive_exists(bind, tables),
        with_contents=contents_exist(bind, tables),
    )
    ids = sorted({int(i) for i in task_ids})
    parts = [pd.DataFrame(columns=list(AGGREGATE_COLUMNS))]
    with bind.connect() if isinstance(bind, Engine) else nullcontext(bind) as conn:
        for first in range(0, len(ids), MAX_IDS_PER_QUERY):
            batch = ids[first : first + MAX_IDS_PER_QUERY]
            log.debug(
                "labels in SQL for %d tasks, jediTaskID=%s..%s",
                len(batch),
                batch[0],
                batch[-1],
            )
            rows = conn.execute(query, {"task_ids": batch}).mappings().all()
            parts.append(
                pd.DataFrame([dict(r) for r in rows], columns=list(AGGREGATE_COLUMNS))
            )
    return _finish(parts, params)


def labels_by_range(
    bind: Engine,
    tables: PandaTables,
    chunk_size: int = 20_000,
    since: datetime | None = None,
    until: datetime | None = None,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
    progress: bool = False,
) -> pd.DataFrame:
    """Compute the labels of every task (created in ``[since, until)``) in SQL.

    The tasks are taken ``chunk_size`` at a time by JEDITASKID range (keyset
    paging), each chunk one aggregation query (see :func:`label_aggregates_query`
    with ``by_range``); only one row per task comes back.

    Parameters
    ----------
    bind:
        Engine of a PostgreSQL or Oracle PanDA database.
    tables:
        PanDA's tables in the right schema.
    chunk_size:
        Tasks per query.
    since, until:
        The creation window (also prunes the jobs' time partitions).
    params:
        Constants of the formulas.
    progress:
        Show a progress bar (tasks per second) on stderr.
    """
    query = label_aggregates_query(
        tables,
        bind.dialect.name,
        params,
        by_range=True,
        since=since,
        until=until,
        with_archive=archive_exists(bind, tables),
        with_contents=contents_exist(bind, tables),
    )
    t = tables.jedi_tasks
    period = _creation_window(t, since, until)
    parts = [pd.DataFrame(columns=list(AGGREGATE_COLUMNS))]
    last: int | None = None
    with (
        bind.connect() as conn,
        tqdm(desc="SQL labels", unit="task", disable=not progress) as bar,
    ):
        while True:
            page = sa.select(t.c.jeditaskid).where(*period)
            if last is not None:
                page = page.where(t.c.jeditaskid > last)
            chunk = page.order_by(t.c.jeditaskid).limit(chunk_size).subquery()
            low, high = conn.execute(
                sa.select(
                    sa.func.min(chunk.c.jeditaskid), sa.func.max(chunk.c.jeditaskid)
                )
            ).one()
            if low is None:
                break
            rows = conn.execute(query, {"low": low, "high": high}).mappings().all()
            parts.append(
                pd.DataFrame([dict(r) for r in rows], columns=list(AGGREGATE_COLUMNS))
            )
            bar.update(len(rows))
            last = int(high)
    return _finish(parts, params)


def _finish(parts: list[pd.DataFrame], params: LabelParams) -> pd.DataFrame:
    """Turn the per-task aggregate rows into the labels frame, as the Python path."""
    aggregates = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
    return labels_from_aggregates(aggregates, params)
