"""Write simulated PanDA history batches into JEDI_TASKS, JEDI_DATASETS, JOBSARCHIVED4.

One transaction per batch, into the tables described by :mod:`panda_predictor.db.tables`
(names, schema and column order come from its Table objects). SQLAlchemy Core inserts
serve any dialect; two fast paths carry the millions of job records: psycopg's COPY on
PostgreSQL and a plain DBAPI executemany of tuples on SQLite (both about 5x faster).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterable
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from panda_predictor.db.engine import get_panda_tables, translate_errors
from panda_predictor.db.migrations import init_database
from panda_predictor.settings import Settings
from pipelines.simulation import HistoryBatch

log = logging.getLogger(__name__)

#: Batch attribute -> table attribute of PandaTables, in foreign-key-friendly order.
TABLES = ("jedi_tasks", "jedi_datasets", "jobsarchived4")


def ensure_panda_tables(engine: Engine, settings: Settings) -> bool:
    """Create PanDA's (test) tables if JEDI_TASKS is missing; return True if created.

    Parameters
    ----------
    engine:
        Engine of the target database.
    settings:
        Settings naming the PanDA schema for the engine's dialect.
    """
    tables = get_panda_tables(settings, engine)
    with translate_errors(engine), engine.connect() as conn:
        present = sa.inspect(conn).has_table(
            tables.jedi_tasks.name, schema=tables.jedi_tasks.schema
        )
    if present:
        return False
    log.info("Creating PanDA test tables in schema %s", tables.jedi_tasks.schema)
    init_database(engine, settings, with_panda_tables=True)
    return True


def _columns(frame: pd.DataFrame, table: sa.Table) -> list[str]:
    """Return the frame's columns in table order; reject columns the table lacks."""
    unexpected = sorted(set(frame.columns) - set(table.c.keys()))
    if unexpected:
        raise ValueError(
            f"The frame for table {table.name!r} must only hold its columns. "
            f"Got unexpected columns {unexpected} instead."
        )
    return [name for name in table.c.keys() if name in frame.columns]  # noqa: SIM118


def _records(frame: pd.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    """Return rows as dicts of plain Python values (None for missing)."""
    lists = []
    for name in columns:
        col = frame[name]
        if pd.api.types.is_datetime64_any_dtype(col):
            values = [None if pd.isna(v) else v.to_pydatetime() for v in col]
        else:
            obj = col.astype(object)
            values = obj.where(col.notna(), None).tolist()
        lists.append(values)
    return [dict(zip(columns, row, strict=True)) for row in zip(*lists, strict=True)]


def _insert_sqlite(conn: Connection, table: sa.Table, frame: pd.DataFrame) -> None:
    """Insert ``frame`` with one DBAPI executemany of tuples (5x faster than Core).

    Datetimes are written in the text format SQLAlchemy's SQLite DateTime uses, so
    Core reads them back as datetimes.
    """
    columns = _columns(frame, table)
    lists = []
    for name in columns:
        col = frame[name]
        if pd.api.types.is_datetime64_any_dtype(col):
            col_text = col.dt.strftime("%Y-%m-%d %H:%M:%S.%f").astype(object)
            lists.append(col_text.where(col.notna(), None).tolist())
        else:
            lists.append(col.astype(object).where(col.notna(), None).tolist())
    name = f"{table.schema}.{table.name}" if table.schema else table.name
    statement = (
        f"/* history_writer._insert_sqlite */ INSERT INTO {name} "
        f"({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    )
    conn.exec_driver_sql(statement, list(zip(*lists, strict=True)))


def _copy_postgresql(conn: Connection, table: sa.Table, frame: pd.DataFrame) -> None:
    """Stream ``frame`` into ``table`` with COPY ... FROM STDIN (CSV, empty = NULL)."""
    columns = _columns(frame, table)
    buffer = io.StringIO()
    frame[columns].to_csv(
        buffer, index=False, header=False, na_rep="", date_format="%Y-%m-%d %H:%M:%S"
    )
    name = f"{table.schema}.{table.name}" if table.schema else table.name
    statement = (
        f"/* history_writer._copy_postgresql */ COPY {name} ({', '.join(columns)}) "
        "FROM STDIN (FORMAT csv)"
    )
    raw: Any = conn.connection.driver_connection  # psycopg.Connection
    with raw.cursor() as cursor, cursor.copy(statement) as copy:
        copy.write(buffer.getvalue())


def write_batch(
    engine: Engine, settings: Settings, batch: HistoryBatch, fast: bool = True
) -> dict[str, int]:
    """Insert one batch in one transaction; return the rows written per table.

    Parameters
    ----------
    engine:
        Engine of a database holding PanDA's (test) tables.
    settings:
        Settings naming the PanDA schema for the engine's dialect.
    batch:
        Frames whose columns are the tables' lower-case column names.
    fast:
        Use the COPY (PostgreSQL) or DBAPI (SQLite) fast path; False: Core inserts.
    """
    tables = get_panda_tables(settings, engine)
    counts = {}
    with translate_errors(engine), engine.begin() as conn:
        for name in TABLES:
            frame: pd.DataFrame = getattr(batch, name)
            table: sa.Table = getattr(tables, name)
            counts[name] = len(frame)
            if frame.empty:
                continue
            if fast and engine.dialect.name == "postgresql":
                _copy_postgresql(conn, table, frame)
            elif fast and engine.dialect.name == "sqlite":
                _insert_sqlite(conn, table, frame)
            else:
                conn.execute(table.insert(), _records(frame, _columns(frame, table)))
    return counts


def load_history(
    engine: Engine, settings: Settings, batches: Iterable[HistoryBatch]
) -> dict[str, int]:
    """Write every batch (one transaction each); return the total rows per table.

    Parameters
    ----------
    engine:
        Engine of the target database (see :func:`ensure_panda_tables`).
    settings:
        Settings naming the PanDA schema for the engine's dialect.
    batches:
        Batches from :func:`pipelines.simulation.simulate_history`.
    """
    totals = dict.fromkeys(TABLES, 0)
    for index, batch in enumerate(batches):
        counts = write_batch(engine, settings, batch)
        for name, count in counts.items():
            totals[name] += count
        log.debug("Wrote simulated batch %d: %s", index, counts)
    log.info("Wrote simulated history: %s", totals)
    return totals
