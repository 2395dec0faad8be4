"""JOBSARCHIVED4 UNION JOBSARCHIVED: a task's jobs wherever PanDA keeps them.

PanDA moves finished jobs from JOBSARCHIVED4 to its archive (ATLAS_PANDAARCH.
JOBSARCHIVED) after some days, and ``getScoutJobData_JEDI`` (panda-server,
``pandaserver/taskbuffer/db_proxy_mods/task_utils_module.py``) reads the scouts from
``jobsArchived4 UNION jobsArchived``. The history readers and the SQL labels do the
same where the archive table exists (a test database built from ``sql/`` has one; a
PanDA account may not see the archive schema), else JOBSARCHIVED4 alone. UNION
(not UNION ALL) as PanDA: a job caught in both tables with identical rows counts once.
Unlike PanDA's live query, no 30-day window on the archive's MODIFICATIONTIME: the
history wants every job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from panda_predictor.db.tables import PandaTables

log = logging.getLogger(__name__)


def archive_exists(bind: Engine | Connection, tables: PandaTables) -> bool:
    """Return whether PanDA's job archive table is there (and visible) on ``bind``."""
    archive = tables.jobsarchived
    with bind.connect() if isinstance(bind, Engine) else nullcontext(bind) as conn:
        found = sa.inspect(conn).has_table(archive.name, schema=archive.schema)
    log.debug("job archive %s %s", archive.fullname, "read" if found else "absent")
    return bool(found)


def job_rows(
    tables: PandaTables,
    with_archive: bool,
    where: Callable[[sa.Table], Sequence[Any]],
    columns: Sequence[str] | None = None,
) -> sa.Subquery:
    """Return the jobs of JOBSARCHIVED4 (UNION JOBSARCHIVED) as one subquery ``jobs``.

    Parameters
    ----------
    tables:
        PanDA's tables.
    with_archive:
        Read the archive too (see :func:`archive_exists`).
    where:
        Conditions for one table (e.g. its JEDITASKID range), applied inside each
        branch so that each table is pruned to the task's partitions.
    columns:
        Names of the columns to read; default all of JOBSARCHIVED4's.
    """
    live, archive = tables.jobsarchived4, tables.jobsarchived
    names = list(columns) if columns is not None else list(live.c.keys())
    query: Any = sa.select(*(live.c[n] for n in names)).where(*where(live))
    if with_archive:
        old = sa.select(*(archive.c[n] for n in names)).where(*where(archive))
        query = sa.union(query, old)
    return query.subquery("jobs")
