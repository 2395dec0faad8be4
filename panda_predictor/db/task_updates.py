"""Plan and run the conditional JEDI_TASKS UPDATE of the tasks decided ``applied``.

:func:`plan_update` turns a prediction and the task's row as read into the values to
write (the scout rule removed, the requester's presets kept where PanDA keeps them,
the resource type reset), or says why the task is refused; :func:`execute_updates`
writes them in one executemany per set of columns, each UPDATE re-checking that JEDI
has not moved or taken the task. The transaction around them is
:func:`panda_predictor.db.writer.write_predictions`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from panda_predictor.core.domain.requested_values import (
    COLUMN_KEYS,
    plan_write,
    preset_note,
    requested_values,
)
from panda_predictor.core.domain.resource_type import ResourceType
from panda_predictor.core.domain.splitrule import (
    SplitRuleEditError,
    has_scout_rule,
    remove_scout_rule,
)
from panda_predictor.core.domain.targets import TARGETS
from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.core.domain.units import database_value
from panda_predictor.db.audit_writer import check_length
from panda_predictor.db.reader import ELIGIBLE_STATUSES
from panda_predictor.db.task_effects import (
    CPUTIME_NOT_FIXED,
    DISK_COUNTS_LEFT,
    READY,
    SCOUT_CAP_LIFTED,
    reset_resource_type,
)

#: Start of the refusal of a task JEDI holds (``LOCKEDBY`` set): not audited.
LOCKED_BY_JEDI = "locked by JEDI"
#: Start of the reason of a task whose SPLITRULE the plugin cannot edit safely.
MALFORMED_SPLITRULE = "malformed_splitrule"


@dataclass(frozen=True)
class WriteOptions:
    """How the write-back writes: units, row locks, lock timeout, presets."""

    fixed_units: bool | None
    lock: bool
    host: str
    #: Seconds any lock wait may take (PostgreSQL); None: not set.
    lock_timeout: float | None
    never_below_preset: bool


def preset_column_names() -> list[str]:
    """Return the JEDI_TASKS columns holding the requester's values and units."""
    names: list[str] = []
    for value, units in COLUMN_KEYS.values():
        names += [value, *((units,) if isinstance(units, str) else units)]
    return names


def plan_update(
    tasks: sa.Table,
    prediction: TaskPrediction,
    options: WriteOptions,
    row: Any = None,
    types: list[ResourceType] | None = None,
) -> Planned | str:
    """Return the JEDI_TASKS values to write for an applied task, or why not.

    ``row`` is the task's status, SPLITRULE, LOCKEDBY and preset values as read
    (row-locked on PostgreSQL/Oracle) earlier in this transaction; None when the
    task was not found; ``types`` PanDA's RESOURCE_TYPES (None: no such table).
    The values include the new SPLITRULE (scout rule removed) and, after a
    ramcount, the resource type; the note (for the audit) says what else was done
    or kept: presets ``never_below_preset`` kept, the resource type, the scout cap.
    """
    task_id = prediction.jeditaskid
    if row is None:
        return "task not found in JEDI_TASKS"
    if row.lockedby is not None:
        return f"{LOCKED_BY_JEDI}: lockedby={row.lockedby}"
    if row.status not in ELIGIBLE_STATUSES or not has_scout_rule(row.splitrule):
        return f"moved by JEDI: status={row.status}, splitrule={row.splitrule}"
    try:
        values: dict[str, Any] = {"splitrule": remove_scout_rule(row.splitrule)}
    except SplitRuleEditError as exc:
        return f"{MALFORMED_SPLITRULE}: {exc}"
    # The requester's values stay where PanDA's scouts would keep them.
    requested = requested_values(dict(row._mapping), COLUMN_KEYS)
    plan = plan_write(
        prediction,
        requested,
        options.fixed_units,
        options.never_below_preset,
        convert=database_value,
    )
    if plan.far is not None:
        return plan.far
    for name, stored in plan.values.items():
        spec = TARGETS[name]
        values[spec.value_column], values[spec.unit_column] = stored
    check_length(tasks, "splitrule", values["splitrule"], task_id)
    notes = [note for note in (preset_note(plan),) if note]
    if "ramcount" in values:
        notes.append(reset_resource_type(values, row, types))
    if row.status == READY:
        notes.append(SCOUT_CAP_LIFTED)
    if options.fixed_units and "cputime" in values:
        notes.append(CPUTIME_NOT_FIXED)
    notes.append(DISK_COUNTS_LEFT)
    return Planned(values, "; ".join(notes))


class Planned(NamedTuple):
    """The JEDI_TASKS values of an applied task and a note for its audit reason."""

    values: dict[str, Any]
    note: str | None


def execute_updates(
    conn: Connection,
    tasks: sa.Table,
    planned: dict[int, dict[str, Any]],
    current: dict[int, Any],
) -> set[int]:
    """Write every planned task with one executemany per set of columns.

    Each UPDATE is conditional: the task must still be eligible, unheld and carry
    the SPLITRULE read earlier in the transaction (``current``), so JEDI's own
    moves win. One statement per column
    set (tasks whose requester values are kept write fewer columns) lets the
    driver send the batch in one go (psycopg's pipeline, Oracle's array DML)
    instead of a round trip per task while the rows are locked. Returns the ids
    written.
    """
    groups: dict[tuple[str, ...], list[int]] = {}
    for task_id, values in planned.items():
        groups.setdefault(tuple(sorted(values)), []).append(task_id)
    written: set[int] = set()
    statuses = {f"b_status_{i}": s for i, s in enumerate(ELIGIBLE_STATUSES)}
    for columns, ids in groups.items():
        update = (
            sa.update(tasks)
            .where(
                tasks.c.jeditaskid == sa.bindparam("b_task_id"),
                # One plain parameter per status: executemany takes no IN list.
                tasks.c.status.in_([sa.bindparam(k) for k in statuses]),
                # Unchanged since read: JEDI did not touch the rule in between.
                tasks.c.splitrule == sa.bindparam("b_read_rule"),
                tasks.c.lockedby.is_(None),
            )
            .values({name: sa.bindparam(f"v_{name}") for name in columns})
        )
        params = [
            {
                **statuses,
                "b_task_id": task_id,
                "b_read_rule": current[task_id].splitrule,
                **{f"v_{name}": planned[task_id][name] for name in columns},
            }
            for task_id in ids
        ]
        result = conn.execute(_tag(update, "writer.write_predictions"), params)
        if conn.dialect.supports_sane_multi_rowcount and result.rowcount == len(ids):
            written.update(ids)
        else:  # some row changed under us (no row locks): see which ones hold ours
            written.update(_holding(conn, tasks, {i: planned[i] for i in ids}))
    return written


def _holding(
    conn: Connection, tasks: sa.Table, planned: dict[int, dict[str, Any]]
) -> set[int]:
    """Return the ids whose row now holds every value planned for it."""
    columns = sorted({name for values in planned.values() for name in values})
    held: set[int] = set()
    for chunk in id_chunks(sorted(planned)):
        query = sa.select(tasks.c.jeditaskid, *(tasks.c[c] for c in columns)).where(
            tasks.c.jeditaskid.in_(chunk)
        )
        for row in conn.execute(_tag(query, "writer.write_predictions")):
            wanted = planned[int(row.jeditaskid)]
            if all(row._mapping[name] == value for name, value in wanted.items()):
                held.add(int(row.jeditaskid))
    return held


def _tag(statement: Any, name: str) -> Any:
    return statement.prefix_with(f"/* {name} */", dialect="*")


def id_chunks(ids: list[int], size: int = 1000) -> Iterator[list[int]]:
    # Oracle accepts at most 1000 values in an IN list.
    for start in range(0, len(ids), size):
        yield ids[start : start + size]
