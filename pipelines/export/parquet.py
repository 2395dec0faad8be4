"""Export JEDI_TASKS, JEDI_DATASETS, JOBSARCHIVED4 (and more) to Parquet, by month.

Also PanDA's job archive JOBSARCHIVED and the dataset files JEDI_DATASET_CONTENTS,
where those tables exist.

Each table is cut by a time column: JEDI_TASKS by CREATIONDATE, JOBSARCHIVED4 by
ENDTIME (as PanDA partitions it by day), JEDI_DATASETS by its task's CREATIONDATE
(it has no time of its own). A month is read in one transaction (REPEATABLE READ on
PostgreSQL, so the count and the rows see the same snapshot), streamed in batches
into one Parquet file, and kept only if three counts agree: ``COUNT(*)`` in the
database, rows read, and rows in the file's footer. Otherwise :class:`ExportMismatch`
names the table and month and the file is removed.

Every month of every table has the same Arrow schema, derived from the column types
the plugin reads (:func:`arrow_schema`), so an empty or all-NULL month does not
change a column's type for the readers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from tqdm import tqdm

from panda_predictor.db.engine import (
    dialect_of,
    get_panda_tables,
    make_engine,
    translate_errors,
)
from panda_predictor.db.job_archive import archive_exists
from panda_predictor.db.job_inputs import contents_exist
from panda_predictor.errors import UserFixableError
from panda_predictor.settings import Settings
from pipelines.export.layout import Manifest, Month, months_between, part_path

log = logging.getLogger(__name__)

#: Tables in export order, by their folder name.
TABLES = ("jedi_tasks", "jedi_datasets", "jobsarchived4")
#: PanDA's job archive, exported (cut by ENDTIME) where the table exists.
ARCHIVE = "jobsarchived"
#: The dataset files, exported (cut by the task's CREATIONDATE) where they exist.
CONTENTS = "jedi_dataset_contents"
DEFAULT_BATCH_ROWS = 50_000


class ExportMismatch(UserFixableError, RuntimeError):
    """The rows written for a month do not match the rows the database holds.

    User-fixable (the command line shows one line): the message names the table and
    month and says to run the export again.
    """


@dataclass
class ExportSummary:
    """What one export run did, per table: months written and skipped, rows written."""

    root: Path
    written: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)


def _arrow_type(column: sa.Column) -> pa.DataType:
    kind = column.type
    if isinstance(kind, sa.DateTime):
        return pa.timestamp("us")
    if isinstance(kind, sa.Integer):  # SmallInteger and BigInteger too
        return pa.int64()
    if isinstance(kind, sa.Numeric | sa.Float):
        return pa.float64()
    return pa.string()


def arrow_schema(table: sa.Table) -> pa.Schema:
    """Return the Arrow schema of ``table``'s columns (lower-case names)."""
    return pa.schema([(c.name.lower(), _arrow_type(c)) for c in table.columns])


@dataclass(frozen=True)
class _Cut:
    """How one table is cut into months: the table, its rows, the time of each row."""

    table: sa.Table
    select: sa.Select
    time: sa.ColumnElement


def _cuts(settings: Settings, bind: Engine | Connection) -> dict[str, _Cut]:
    tables = get_panda_tables(settings, bind)
    t, d, j = tables.jedi_tasks, tables.jedi_datasets, tables.jobsarchived4
    cuts = {
        "jedi_tasks": _Cut(t, sa.select(*t.c), t.c.creationdate),
        "jedi_datasets": _Cut(
            d,
            sa.select(*d.c).join_from(d, t, d.c.jeditaskid == t.c.jeditaskid),
            t.c.creationdate,
        ),
        "jobsarchived4": _Cut(j, sa.select(*j.c), j.c.endtime),
    }
    if archive_exists(bind, tables):
        a = tables.jobsarchived
        cuts[ARCHIVE] = _Cut(a, sa.select(*a.c), a.c.endtime)
    if contents_exist(bind, tables):
        f = tables.jedi_dataset_contents
        cuts[CONTENTS] = _Cut(
            f,
            sa.select(*f.c).join_from(f, t, f.c.jeditaskid == t.c.jeditaskid),
            t.c.creationdate,
        )
    return cuts


def _in_month(cut: _Cut, month: Month) -> Any:
    if month.start is None:
        return cut.time.is_(None)
    return sa.and_(cut.time >= month.start, cut.time < month.end)


def _months(conn: Connection, cut: _Cut) -> list[Month]:
    """Return the months ``cut``'s table spans, plus the NULL-time rows if any."""
    counted = cut.select.with_only_columns(
        sa.func.min(cut.time), sa.func.max(cut.time), sa.func.count()
    ).order_by(None)
    first, last, total = conn.execute(counted).one()
    months = [] if first is None else months_between(first, last)
    timed = counted.where(cut.time.is_not(None))
    if total > conn.execute(timed).one()[2]:
        months.append(Month(None, None))
    return months


def _frame(rows: Sequence[Any], schema: pa.Schema) -> pa.Table:
    frame = pd.DataFrame.from_records(rows, columns=schema.names)
    for name in schema.names:
        if pa.types.is_floating(schema.field(name).type):
            frame[name] = pd.to_numeric(frame[name], errors="coerce")
    return pa.Table.from_pandas(frame, schema=schema, preserve_index=False, safe=False)


def _stream(
    conn: Connection, query: sa.Select, batch_rows: int
) -> Iterator[Sequence[Any]]:
    result = conn.execution_options(stream_results=True).execute(query)
    while rows := result.fetchmany(batch_rows):
        yield rows


def _export_month(
    conn: Connection,
    name: str,
    cut: _Cut,
    month: Month,
    schema: pa.Schema,
    path: Path,
    batch_rows: int,
    bar: tqdm,
) -> int:
    """Write one month of one table to ``path``; return its verified row count."""
    where = _in_month(cut, month)
    expected = conn.execute(
        cut.select.with_only_columns(sa.func.count()).where(where).order_by(None)
    ).scalar_one()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name + ".tmp")
    written = 0
    with pq.ParquetWriter(tmp, schema) as writer:
        for rows in _stream(conn, cut.select.where(where), batch_rows):
            writer.write_table(_frame(rows, schema))
            written += len(rows)
            bar.update(len(rows))
        if written == 0:
            writer.write_table(schema.empty_table())
    in_file = pq.ParquetFile(tmp).metadata.num_rows
    if not expected == written == in_file:
        tmp.unlink()
        raise ExportMismatch(
            f"The export of {name} for month {month.key} must hold as many rows as "
            f"the database. Got {expected} in the database, {written} read and "
            f"{in_file} in the file instead; the month was not kept, run the export "
            "again."
        )
    os.replace(tmp, path)
    return written


def export_history(
    settings: Settings,
    out_dir: Path,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    progress: bool = True,
    now: datetime | None = None,
) -> ExportSummary:
    """Export the three tables of ``settings``' database under ``out_dir``.

    Parameters
    ----------
    settings:
        Settings naming the database and PanDA's schema.
    out_dir:
        Folder of the export (created); a second run into it resumes.
    batch_rows:
        Rows fetched and written per batch (bounds memory).
    progress:
        Show a progress bar with rows per second on stderr.
    now:
        Time of the export (UTC, naive); a month ending after it is not final.
    """
    if batch_rows <= 0:
        raise ValueError(
            f"The 'batch_rows' field must be a positive integer. Got {batch_rows!r} "
            "instead."
        )
    now = now or datetime.now(UTC).replace(tzinfo=None)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(out_dir)
    summary = ExportSummary(out_dir)
    engine = make_engine(settings)
    try:
        with translate_errors(engine):
            _export_all(engine, settings, manifest, summary, batch_rows, progress, now)
    finally:
        engine.dispose()
    return summary


def _export_all(
    engine: Engine,
    settings: Settings,
    manifest: Manifest,
    summary: ExportSummary,
    batch_rows: int,
    progress: bool,
    now: datetime,
) -> None:
    cuts = _cuts(settings, engine)
    with engine.connect() as conn:
        spans = {name: _months(conn, cut) for name, cut in cuts.items()}
    # One snapshot per month on PostgreSQL: COUNT(*) and the rows agree.
    snapshot = (
        {"isolation_level": "REPEATABLE READ"}
        if dialect_of(engine) == "postgresql"
        else {}
    )
    with tqdm(desc="export", unit="row", disable=not progress) as bar:
        for name in cuts:
            todo = [m for m in spans[name] if not manifest.is_final(name, m)]
            summary.skipped[name] = len(spans[name]) - len(todo)
            summary.written[name], summary.rows[name] = 0, 0
            for month in todo:
                bar.set_postfix_str(f"{name} {month.key}")
                with (
                    engine.connect().execution_options(**snapshot) as conn,
                    conn.begin(),
                ):
                    rows = _export_month(
                        conn,
                        name,
                        cuts[name],
                        month,
                        arrow_schema(cuts[name].table),
                        part_path(manifest.path.parent, name, month),
                        batch_rows,
                        bar,
                    )
                final = month.end is not None and month.end <= now
                manifest.record(name, month, rows, final)
                summary.written[name] += 1
                summary.rows[name] += rows
                log.info("Exported %s %s: %d rows", name, month.key, rows)
