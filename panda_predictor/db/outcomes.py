"""Read and write the feedback loop's table ``pp_task_outcome`` and what feeds it.

The table (``sql/<dialect>/plugin/0002_outcomes.sql``) holds, per audited task whose
jobs ran, the classes written, the truth and the job outcomes. This module reads the
audit rows and job records the feedback needs, upserts outcome rows, and reads
recently created tasks for drift checks. Every query carries a ``/* outcomes.* */``
tag and bind variables; job queries always carry the task ids (partition pruning).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
)
from sqlalchemy.engine import Connection, Engine

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.db.engine import (
    dialect_of,
    get_panda_tables,
    get_plugin_tables,
    translate_errors,
)
from panda_predictor.db.reader import read_task_features
from panda_predictor.settings import Settings

#: Job columns the feedback reads from JOBSARCHIVED4.
JOB_READ_COLUMNS = (
    "pandaid",
    "jeditaskid",
    "jobstatus",
    "specialhandling",
    "corecount",
    "nevents",
    "starttime",
    "endtime",
    "cpuconsumptiontime",
    "maxpss",
    "inputfilebytes",
    "outputfilebytes",
    "hs06sec",
    "minramcount",
    "maxwalltime",
)
_IN_LIST = 500


@lru_cache(maxsize=8)
def outcome_table(schema: str | None) -> Table:
    """Describe ``pp_task_outcome`` in ``schema`` (see 0002_outcomes.sql)."""
    columns: list[Column] = []
    for name in TARGET_NAMES:
        columns += [
            Column(f"{name}_pred_class", SmallInteger),
            Column(f"{name}_true_class", SmallInteger),
            Column(f"{name}_true_value", Float),
        ]
    return Table(
        "pp_task_outcome",
        MetaData(schema=schema),
        Column("jeditaskid", BigInteger, primary_key=True, autoincrement=False),
        Column("model_name", String(128), nullable=False),
        Column("model_version", String(64), nullable=False),
        Column("decision", String(16), nullable=False),
        Column("predicted_at", DateTime, nullable=False),
        Column("first_job_at", DateTime),
        Column("n_jobs", Integer),
        Column("n_finished", Integer),
        Column("n_failed", Integer),
        Column("n_failed_memory", Integer),
        Column("n_failed_time", Integer),
        Column("mem_requested_gbh", Float),
        Column("mem_used_gbh", Float),
        Column("wall_requested_h", Float),
        Column("wall_used_h", Float),
        *columns,
        Column("evaluated_at", DateTime, nullable=False),
    )


def get_outcome_table(settings: Settings, bind: Engine | Connection) -> Table:
    """Return the outcome table in the plugin schema of ``bind``'s dialect."""
    return outcome_table(settings.plugin_schema_for(dialect_of(bind)))


def _tag(query: Any, name: str) -> Any:
    return query.prefix_with(f"/* outcomes.{name} */", dialect="*")


def _chunks(values: Sequence[int], size: int = _IN_LIST) -> Iterator[list[int]]:
    for start in range(0, len(values), size):
        yield [int(v) for v in values[start : start + size]]


def read_audit_frame(
    conn: Connection,
    settings: Settings,
    since: datetime | None = None,
    until: datetime | None = None,
) -> pd.DataFrame:
    """Return the audit rows predicted in ``[since, until)`` (all when None).

    With the reason and the predicted ramCount, so the what-if report can tell
    what a shadow or held-back task would have got.
    """
    audit = get_plugin_tables(settings, conn).audit
    cols = [
        audit.c.jeditaskid,
        audit.c.model_name,
        audit.c.model_version,
        audit.c.decision,
        audit.c.reason,
        audit.c.predicted_at,
        *(audit.c[f"{t}_class"] for t in TARGET_NAMES),
        audit.c.ramcount_value,
    ]
    query = sa.select(*cols).order_by(audit.c.jeditaskid)
    if since is not None:
        query = query.where(audit.c.predicted_at >= sa.bindparam("since", since))
    if until is not None:
        query = query.where(audit.c.predicted_at < sa.bindparam("until", until))
    with translate_errors(conn):
        rows = conn.execute(_tag(query, "read_audit_frame")).all()
    return pd.DataFrame(rows, columns=[c.name for c in cols])


def read_jobs(
    conn: Connection, settings: Settings, task_ids: Sequence[int]
) -> pd.DataFrame:
    """Return the JOBSARCHIVED4 rows (:data:`JOB_READ_COLUMNS`) of ``task_ids``."""
    jobs = get_panda_tables(settings, conn).jobsarchived4
    cols = [jobs.c[name] for name in JOB_READ_COLUMNS]
    frames = []
    with translate_errors(conn):
        for chunk in _chunks(sorted(set(task_ids))):
            query = sa.select(*cols).where(
                jobs.c.jeditaskid.between(chunk[0], chunk[-1]),
                jobs.c.jeditaskid.in_(sa.bindparam("ids", expanding=True)),
            )
            rows = conn.execute(_tag(query, "read_jobs"), {"ids": chunk}).all()
            frames.append(pd.DataFrame(rows, columns=list(JOB_READ_COLUMNS)))
    if not frames:
        return pd.DataFrame(columns=list(JOB_READ_COLUMNS))
    return pd.concat(frames, ignore_index=True)


def read_tasks(
    conn: Connection, settings: Settings, task_ids: Sequence[int]
) -> pd.DataFrame:
    """Return the task rows (with input counts) of ``task_ids``."""
    return read_task_features(conn, settings, [int(t) for t in task_ids])


def _plain(value: Any) -> Any:
    """Return a DB-API friendly scalar (no numpy types, NaN as NULL)."""
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def upsert_outcomes(
    conn: Connection, settings: Settings, outcomes: pd.DataFrame
) -> int:
    """Replace the outcome rows of the tasks in ``outcomes``; return rows written.

    Delete-then-insert inside the caller's transaction keeps it portable across
    SQLite, PostgreSQL and Oracle (no dialect-specific MERGE).
    """
    if outcomes.empty:
        return 0
    table = get_outcome_table(settings, conn)
    names = [c.name for c in table.columns if c.name in outcomes.columns]
    rows = [
        {k: _plain(v) for k, v in zip(names, values, strict=True)}
        for values in outcomes[names].itertuples(index=False, name=None)
    ]
    delete = table.delete().where(
        table.c.jeditaskid.in_(sa.bindparam("ids", expanding=True))
    )
    with translate_errors(conn):
        for chunk in _chunks([r["jeditaskid"] for r in rows]):
            conn.execute(_tag(delete, "upsert_outcomes"), {"ids": chunk})
        conn.execute(_tag(table.insert(), "upsert_outcomes"), rows)
    return len(rows)


def read_outcomes(
    bind: Connection | Engine,
    settings: Settings,
    since: datetime | None = None,
    until: datetime | None = None,
) -> pd.DataFrame:
    """Return the outcome rows predicted in ``[since, until)`` (all when None)."""
    table = get_outcome_table(settings, bind)
    query = sa.select(table).order_by(table.c.predicted_at, table.c.jeditaskid)
    if since is not None:
        query = query.where(table.c.predicted_at >= sa.bindparam("since", since))
    if until is not None:
        query = query.where(table.c.predicted_at < sa.bindparam("until", until))
    with translate_errors(bind):
        if isinstance(bind, Engine):
            with bind.connect() as conn:
                rows = conn.execute(_tag(query, "read_outcomes")).all()
        else:
            rows = bind.execute(_tag(query, "read_outcomes")).all()
    frame = pd.DataFrame(rows, columns=[c.name for c in table.columns])
    if not frame.empty:
        frame["predicted_at"] = pd.to_datetime(frame["predicted_at"])
    return frame


def read_created_tasks(
    bind: Connection | Engine,
    settings: Settings,
    since: datetime,
    until: datetime,
    limit: int | None = None,
) -> pd.DataFrame:
    """Return the tasks created in ``[since, until)`` with their input counts."""
    tasks = get_panda_tables(settings, bind).jedi_tasks
    query = (
        sa.select(tasks.c.jeditaskid)
        .where(
            tasks.c.creationdate >= sa.bindparam("since", since),
            tasks.c.creationdate < sa.bindparam("until", until),
        )
        .order_by(tasks.c.jeditaskid)
    )
    if limit is not None:
        query = query.limit(limit)
    with translate_errors(bind):
        if isinstance(bind, Engine):
            with bind.connect() as conn:
                ids = list(conn.execute(_tag(query, "read_created_tasks")).scalars())
                return read_task_features(conn, settings, ids)
        ids = list(bind.execute(_tag(query, "read_created_tasks")).scalars())
        return read_task_features(bind, settings, ids)
