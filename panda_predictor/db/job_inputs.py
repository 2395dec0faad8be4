"""A job's events and master input size from JEDI_DATASET_CONTENTS, as PanDA takes them.

``getScoutJobData_JEDI`` (panda-server,
``pandaserver/taskbuffer/db_proxy_mods/task_utils_module.py``) reads a scout's files
from JEDI_DATASET_CONTENTS: status ``finished``, file type ``input`` or
``pseudo_input``, in a dataset without MASTERID (the master input, not the secondary
ones). Per job it sums ``CoreUtils.getEffectiveFileSize`` (MB; a file without size,
or of size 0, counts 1 MB; an event range counts its share of the file) and
``CoreUtils.getEffectiveNumEvents`` (the range's length, else the file's NEVENTS,
else 1), and notes whether a file was ``pseudo_input``. :func:`inputs_per_job` is
that in SQL, one row per (JEDITASKID, PANDAID); the reader and the SQL labels join it
to the jobs, and :mod:`panda_predictor.core.labels` prefers it to the job's own
NEVENTS and INPUTFILEBYTES.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from panda_predictor.core.labels import (
    BYTES_PER_INPUT_MB,
    FINISHED_FILE,
    INPUT_COLUMNS,
    INPUT_FILE_TYPES,
    PSEUDO_INPUT_TYPE,
)
from panda_predictor.db.tables import PandaTables


def contents_exist(bind: Engine | Connection, tables: PandaTables) -> bool:
    """Return whether JEDI_DATASET_CONTENTS is there (and visible) on ``bind``."""
    contents = tables.jedi_dataset_contents
    with bind.connect() if isinstance(bind, Engine) else nullcontext(bind) as conn:
        return bool(sa.inspect(conn).has_table(contents.name, schema=contents.schema))


def _double(expr: Any) -> Any:
    return sa.cast(expr, sa.Double())


def _trunc(expr: Any, dialect: str) -> Any:
    """Return ``int(expr)`` (towards zero) on ``dialect``; CAST rounds on PostgreSQL."""
    if dialect == "sqlite":
        return sa.cast(expr, sa.BigInteger)
    return sa.func.trunc(expr)


def inputs_per_job(
    tables: PandaTables, dialect: str, where: Callable[[sa.Table], Sequence[Any]]
) -> sa.Subquery:
    """Return per (jeditaskid, pandaid) the :data:`INPUT_COLUMNS` of its files.

    Parameters
    ----------
    tables:
        PanDA's tables.
    dialect:
        ``sqlite``, ``postgresql`` or ``oracle``.
    where:
        Conditions for one table (the task ids), applied to the files and datasets.
    """
    f, d = tables.jedi_dataset_contents, tables.jedi_datasets
    one_mb: Any = sa.literal(BYTES_PER_INPUT_MB, sa.Double())
    ranged = sa.and_(
        f.c.nevents > 0, f.c.startevent.is_not(None), f.c.endevent.is_not(None)
    )
    share = _trunc(
        _double(f.c.fsize)
        * _double(f.c.endevent - f.c.startevent + 1)
        / _double(sa.func.nullif(f.c.nevents, 0)),
        dialect,
    )
    size = sa.case(
        (sa.or_(f.c.fsize.is_(None), f.c.fsize == 0), one_mb),
        (sa.and_(ranged, share == 0), one_mb),
        (ranged, _double(share)),
        else_=_double(f.c.fsize),
    )
    length = f.c.endevent - f.c.startevent + 1
    events = sa.case(
        (
            sa.and_(f.c.startevent.is_not(None), f.c.endevent.is_not(None)),
            sa.case((length > 0, length), else_=1),
        ),
        (f.c.nevents.is_not(None), f.c.nevents),
        else_=1,
    )
    pseudo = sa.case((f.c.type == PSEUDO_INPUT_TYPE, 1), else_=0)
    input_mb, nevents, pseudo_input = INPUT_COLUMNS
    return (
        sa.select(
            f.c.jeditaskid,
            f.c.pandaid,
            sa.func.sum(size / one_mb).label(input_mb),
            _double(sa.func.sum(events)).label(nevents),
            sa.func.max(pseudo).label(pseudo_input),
        )
        .select_from(
            f.join(
                d,
                sa.and_(
                    d.c.jeditaskid == f.c.jeditaskid, d.c.datasetid == f.c.datasetid
                ),
            )
        )
        .where(
            *where(f),
            *where(d),
            f.c.status == FINISHED_FILE,
            f.c.type.in_(INPUT_FILE_TYPES),
            f.c.pandaid.is_not(None),
            d.c.masterid.is_(None),
        )
        .group_by(f.c.jeditaskid, f.c.pandaid)
        .subquery("inputs")
    )


def with_inputs(jobs: sa.Subquery, inputs: sa.Subquery | None) -> sa.Select:
    """Return the rows of ``jobs`` with their :data:`INPUT_COLUMNS` (NULL: no files)."""
    if inputs is None:
        kinds: tuple[Any, ...] = (sa.Double(), sa.Double(), sa.Integer())
        nulls: list[Any] = [
            sa.cast(sa.null(), kind).label(name)
            for name, kind in zip(INPUT_COLUMNS, kinds, strict=True)
        ]
        return sa.select(*jobs.c, *nulls)
    on = sa.and_(
        inputs.c.jeditaskid == jobs.c.jeditaskid, inputs.c.pandaid == jobs.c.pandaid
    )
    return sa.select(*jobs.c, *(inputs.c[name] for name in INPUT_COLUMNS)).select_from(
        jobs.outerjoin(inputs, on)
    )
