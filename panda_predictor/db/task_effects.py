"""What the database write-back changes besides the predicted values, as JEDI would.

A task that skips its scouts must be left as JEDI leaves a task after them
(panda-server's code, read for these facts; the code here is our own):

- **the scout cap**: at ``ready`` JEDI's ``insertFilesForDataset_JEDI`` has capped
  the master dataset's ``nFilesToBeUsed`` at the scout chunks; only the scouting
  branch of ``prepareTasksToBeFinished_JEDI`` lifts it, to the number of its
  usable files (:func:`lift_scout_caps`);
- **the resource type**: after a ramCount change PanDA calls
  ``reset_resource_type_task`` (:func:`reset_resource_type`);
- **the cputime unit**: PanDA's re-measurement reads the previous cpuTimeUnit from
  the task *parameters*, so JEDI_TASKS gets plain ``HS06sPerEvent``
  (:func:`~panda_predictor.core.domain.units.database_value`, which the message route
  publishes too);
- OUTDISKCOUNT and WORKDISKCOUNT are not predicted and stay for PanDA's first
  re-measurement (:data:`DISK_COUNTS_LEFT`).

Each is said in the audit reason of the task (the notes below).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from panda_predictor.core.domain.resource_type import ResourceType, resource_type_of
from panda_predictor.db.reader import INPUT_TYPES

#: The status at which JEDI has capped the master dataset at the scout chunks.
READY = "ready"
#: Audit note of a written ``ready`` task: the cap lifted as JEDI's scouting branch.
SCOUT_CAP_LIFTED = "scout cap lifted (master nFilesToBeUsed = its usable files)"
#: Audit note of every written task: the disk columns are left to PanDA.
DISK_COUNTS_LEFT = (
    "outDiskCount/workDiskCount left to PanDA's re-measurement (not predicted)"
)
#: Audit note of a written task when ``fixed_units`` is on: cputime is not fixed.
CPUTIME_NOT_FIXED = (
    "cputime written as HS06sPerEvent, not Fixed: PanDA reads the Fixed unit "
    "from the task parameters"
)
#: Audit note of a new ramcount where the database has no RESOURCE_TYPES rows.
RESOURCE_TYPE_KEPT = "resource type not reset: no RESOURCE_TYPES rows"


def reset_resource_type(
    values: dict[str, Any], row: Any, types: list[ResourceType] | None
) -> str:
    """Set ``values['resource_type']`` by PanDA's rule for the new ramCount.

    What ``reset_resource_type_task`` does after JEDI raises a ramCount, here in
    the same UPDATE. ``row`` is the task as read (corecount, baseramcount,
    ramunit); without RESOURCE_TYPES rows (``types`` None) the column stays.
    Returns the note for the audit reason.
    """
    if types is None:
        return RESOURCE_TYPE_KEPT
    values["resource_type"] = resource_type_of(
        types,
        row.corecount,
        values["ramcount"],
        row.baseramcount,
        values.get("ramunit", row.ramunit),
    )
    return f"resource_type={values['resource_type']}"


#: File statuses JEDI does not count as usable when it lifts the cap.
UNUSABLE_FILE_STATUSES = ("pending", "lost", "missing", "staging")


def lift_scout_caps(
    conn: Connection, datasets: sa.Table, contents: sa.Table, ids: list[int]
) -> None:
    """Let the master datasets of written ``ready`` tasks use all their files.

    Only the scouting branch of ``prepareTasksToBeFinished_JEDI`` lifts the cap:
    for each input dataset of the task without a master it counts the files in
    JEDI_DATASET_CONTENTS whose status is not pending, lost, missing or staging,
    and sets ``nFilesToBeUsed`` to that count (and ``modificationTime``); a
    dataset with no such file keeps its value. A task without scouts never passes
    there, so the write-back makes the same change in its own transaction, on the
    tasks it has just written (and holds locked on PostgreSQL/Oracle). A dataset
    with no file rows at all (a simulated or test database that does not model
    files) gets ``nFiles``, as JEDI's older scouting branch set it.
    """
    c = contents
    same_dataset = sa.and_(
        c.c.jeditaskid == datasets.c.jeditaskid, c.c.datasetid == datasets.c.datasetid
    )
    usable = sa.and_(same_dataset, c.c.status.not_in(UNUSABLE_FILE_STATUSES))
    has_files = sa.exists().where(same_dataset)
    n_usable = sa.select(sa.func.count()).where(usable).scalar_subquery()
    now = datetime.now(UTC).replace(tzinfo=None)
    for chunk in _chunks(ids):
        update = (
            sa.update(datasets)
            .where(
                datasets.c.jeditaskid.in_(chunk),
                datasets.c.type.in_(INPUT_TYPES),
                datasets.c.masterid.is_(None),
                sa.or_(~has_files, sa.exists().where(usable)),
            )
            .values(
                nfilestobeused=sa.case((has_files, n_usable), else_=datasets.c.nfiles),
                modificationtime=now,
            )
            .prefix_with("/* writer.write_predictions */", dialect="*")
        )
        conn.execute(update)


def _chunks(ids: list[int], size: int = 1000) -> Iterator[list[int]]:
    # Oracle accepts at most 1000 values in an IN list.
    for start in range(0, len(ids), size):
        yield ids[start : start + size]
