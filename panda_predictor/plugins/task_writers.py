"""Write a scout_prediction into a JEDI task: what to change, and two ways to write it.

:func:`plan_task` (pure) decides from the task as read: a task is changed only while
it is ``defined`` (before ContentsFeeder inserts its files, so JEDI has not yet
capped the master dataset at the scout chunks), unheld (``lockedBy`` empty) and
still scheduled for scouts (``US=`` in splitRule). The scout rule is removed and the
values are written, except where PanDA's scouts would keep the task's own value: a
``...Fixed`` unit is never overwritten and a larger preset walltime stays.

:class:`TaskBufferWriter` writes through JEDI's own task-buffer calls, one task at a
time, as inside JEDI: ``getTaskWithID_JEDI``, ``updateTask_JEDI`` with the read
splitRule as criterion and ``oldStatus=["defined"]``, then
``reset_resource_type_task`` after a ramCount change. :class:`SqlTaskWriter` writes
a whole received batch in the caller's transaction over SQLAlchemy (rows read
``FOR UPDATE SKIP LOCKED`` under a lock timeout, one executemany of conditional
UPDATEs, the resource type set by PanDA's rule in the same statement), so the
message's idempotency key is recorded atomically with the task's change.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from panda_predictor.core.domain.resource_type import ResourceType, resource_type_of
from panda_predictor.core.domain.splitrule import (
    SplitRuleEditError,
    has_scout_rule,
    remove_scout_rule,
)
from panda_predictor.core.domain.units import is_fixed
from panda_predictor.db.engine import dialect_of, get_panda_tables
from panda_predictor.db.pg_arrays import any_of, array_type, table_name
from panda_predictor.db.resource_types import read_resource_types
from panda_predictor.messages.scout_prediction import ScoutPrediction, unit_of
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

#: The only status at which a prediction is applied.
DEFINED = "defined"
#: JediTaskSpec attribute -> JEDI_TASKS column, for what the writers read and write.
COLUMNS = {
    "jediTaskID": "jeditaskid",
    "status": "status",
    "splitRule": "splitrule",
    "lockedBy": "lockedby",
    "coreCount": "corecount",
    "baseRamCount": "baseramcount",
    "ramCount": "ramcount",
    "ramUnit": "ramunit",
    "cpuTime": "cputime",
    "cpuTimeUnit": "cputimeunit",
    "ioIntensity": "iointensity",
    "ioIntensityUnit": "iointensityunit",
    "walltime": "walltime",
    "walltimeUnit": "walltimeunit",
}


@dataclass(frozen=True)
class Plan:
    """What to set on a task (JediTaskSpec names) and which values stay, and why."""

    changes: dict[str, Any]
    kept: dict[str, str] = field(default_factory=dict)

    @property
    def ram_changed(self) -> bool:
        """Return whether ramCount or ramUnit changes (resource type to reset)."""
        return "ramCount" in self.changes or "ramUnit" in self.changes


def plan_task(message: ScoutPrediction, task: Mapping[str, Any] | None) -> Plan | str:
    """Return the changes for an ``applied`` message, or the refusal's reason.

    ``task`` maps JediTaskSpec attribute names to the task's current values; None
    when JEDI does not know the task.
    """
    if task is None:
        return "unknown task: not in JEDI_TASKS"
    status = task.get("status")
    if status != DEFINED:
        return (
            f"task is {status!r}, not 'defined': JEDI may have capped its inputs "
            "at the scout chunks, so it keeps its scouts"
        )
    if task.get("lockedBy"):
        return f"task held by JEDI (lockedBy={task['lockedBy']}): scouts run"
    rule = task.get("splitRule")
    if not has_scout_rule(rule):
        return f"no scout rule in splitRule={rule!r}: nothing to skip"
    try:
        changes: dict[str, Any] = {"splitRule": remove_scout_rule(rule)}
    except SplitRuleEditError as exc:
        return str(exc)
    kept: dict[str, str] = {}
    for value_name, value, unit in message.values.items():
        unit_name = unit_of(value_name)
        current, current_unit = task.get(value_name), task.get(unit_name)
        if is_fixed(current_unit):
            kept[value_name] = f"{current_unit} is never overwritten"
            continue
        if (
            value_name == "walltime"
            and current is not None
            and (current < 0 or current > value)
        ):
            kept[value_name] = "the preset walltime is larger"
            continue
        if value_name == "walltime" and value == 0:
            kept[value_name] = "0 is PanDA's 'no estimate'"
            continue
        changes[value_name], changes[unit_name] = value, unit
    return Plan(changes, kept)


def describe(plan: Plan) -> str:
    """Return the audit reason of an applied plan: what was written and kept."""
    written = ", ".join(f"{k}={v}" for k, v in plan.changes.items() if k != "splitRule")
    text = f"scouts skipped; wrote {written or 'no value'}"
    if plan.kept:
        text += "; kept " + ", ".join(f"{k} ({why})" for k, why in plan.kept.items())
    return text


class TaskBufferError(RuntimeError):
    """JEDI's task buffer failed a call: not the message's fault (redelivered)."""


class JediTaskBuffer(Protocol):
    """The calls of JEDI's ``JediTaskBuffer`` (``self.tbIF``) the writer makes."""

    def getTaskWithID_JEDI(self, jediTaskID: int, fullFlag: bool = False) -> Any:  # noqa: N802,N803
        """Return ``(ok, task spec or None)``."""

    def updateTask_JEDI(  # noqa: N802
        self,
        taskSpec: Any,
        criteria: dict[str, Any],
        oldStatus: list[str] | None = None,  # noqa: N803
    ) -> Any:
        """Update the spec's changed attributes where criteria hold; ``(ok, rows)``."""

    def reset_resource_type_task(
        self, jedi_task_id: int, use_commit: bool = True
    ) -> bool:
        """Recompute and store the task's resource type."""


class TaskBufferWriter:
    """Apply messages one by one through JEDI's task buffer (see module docstring)."""

    def __init__(self, task_buffer: JediTaskBuffer) -> None:
        self.tb = task_buffer

    def apply(self, message: ScoutPrediction) -> tuple[str, str]:
        """Apply one ``applied`` message; return ``(outcome, reason)``."""
        task_id = message.task_id
        got = self.tb.getTaskWithID_JEDI(task_id, False)
        ok, spec = got if isinstance(got, tuple) else (True, got)
        if not ok:
            raise TaskBufferError(f"getTaskWithID_JEDI failed for jediTaskID={task_id}")
        row = None if spec is None else {a: getattr(spec, a, None) for a in COLUMNS}
        plan = plan_task(message, row)
        if isinstance(plan, str):
            return "refused", plan
        read_rule = row["splitRule"] if row else None
        for name, value in plan.changes.items():
            setattr(spec, name, value)
        ok, rows = self.tb.updateTask_JEDI(
            spec, {"jediTaskID": task_id, "splitRule": read_rule}, oldStatus=[DEFINED]
        )
        if not ok:
            raise TaskBufferError(f"updateTask_JEDI failed for jediTaskID={task_id}")
        if not rows:
            return "refused", "moved by JEDI during the write: scouts run"
        reason = describe(plan)
        if plan.ram_changed and not self.tb.reset_resource_type_task(task_id):
            reason += "; reset_resource_type_task failed, resource type not reset"
            log.warning("jediTaskID=%d reset_resource_type_task failed", task_id)
        return "applied", reason


class SqlTaskWriter:
    """Apply a batch of messages in the caller's transaction (see module docstring).

    Parameters
    ----------
    settings:
        Names PanDA's schema.
    lock_timeout_ms:
        PostgreSQL ``lock_timeout`` of the transaction: a row JEDI holds is skipped
        (SKIP LOCKED) and no other lock is waited for longer than this.
    """

    def __init__(self, settings: Settings, lock_timeout_ms: int = 1000) -> None:
        self.settings = settings
        self.lock_timeout_ms = lock_timeout_ms
        self._types: list[ResourceType] | None = None

    def resource_types(self, conn: Connection) -> list[ResourceType] | None:
        """Return PanDA's RESOURCE_TYPES rows (read once per writer; None: no table)."""
        if self._types is None:
            self._types = read_resource_types(conn, self.settings)
        return self._types

    def apply_batch(
        self, conn: Connection, messages: list[ScoutPrediction]
    ) -> dict[str, tuple[str, str]]:
        """Apply ``applied`` messages; return ``key -> (outcome, reason)``."""
        if not messages:
            return {}
        tasks = get_panda_tables(self.settings, conn).jedi_tasks
        dialect = dialect_of(conn)
        if dialect == "postgresql":
            _set_local(conn, self.lock_timeout_ms)
        ids = sorted({m.task_id for m in messages})
        query = (
            sa.select(*(tasks.c[c] for c in COLUMNS.values()))
            .where(
                any_of(tasks.c.jeditaskid, ids)
                if dialect == "postgresql"
                else tasks.c.jeditaskid.in_(ids)
            )
            .order_by(tasks.c.jeditaskid)
            .prefix_with("/* task_writers.apply_batch */", dialect="*")
        )
        if dialect in ("postgresql", "oracle"):
            query = query.with_for_update(skip_locked=True)
        # The columns come in COLUMNS' order, jeditaskid first.
        rows = {
            int(r[0]): dict(zip(COLUMNS, r, strict=True)) for r in conn.execute(query)
        }
        types = self.resource_types(conn)
        now = datetime.now(UTC).replace(tzinfo=None)
        outcomes: dict[str, tuple[str, str]] = {}
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        handled: set[int] = set()
        for message in messages:
            if message.task_id in handled:  # a task's first message wins
                outcomes[message.idempotency_key] = (
                    "refused",
                    "another message for this task came first in the same batch",
                )
                continue
            handled.add(message.task_id)
            row = rows.get(message.task_id)
            plan = plan_task(message, row)
            if isinstance(plan, str):
                if row is None and message.task_id in ids:
                    plan = _missing_reason(conn, tasks, message.task_id, plan)
                outcomes[message.idempotency_key] = ("refused", plan)
                continue
            assert row is not None
            values = {COLUMNS[k]: v for k, v in plan.changes.items()}
            values["modificationtime"] = now  # as JEDI's updateTask_JEDI does
            if plan.ram_changed and types is not None:
                merged = {**row, **plan.changes}
                values["resource_type"] = resource_type_of(
                    types,
                    merged["coreCount"],
                    merged["ramCount"],
                    merged["baseRamCount"],
                    merged["ramUnit"],
                )
            params = {f"v_{k}": v for k, v in values.items()}
            params.update(b_id=message.task_id, b_rule=row["splitRule"])
            groups.setdefault(tuple(sorted(values)), []).append(params)
            outcomes[message.idempotency_key] = ("applied", describe(plan))
        for columns, group in groups.items():
            if dialect == "postgresql":
                _update_from_values(conn, tasks, columns, group)
                continue
            update = (
                sa.update(tasks)
                .where(
                    tasks.c.jeditaskid == sa.bindparam("b_id"),
                    tasks.c.status == DEFINED,
                    tasks.c.splitrule == sa.bindparam("b_rule"),
                    tasks.c.lockedby.is_(None),
                )
                .values({c: sa.bindparam(f"v_{c}") for c in columns})
                .prefix_with("/* task_writers.apply_batch */", dialect="*")
            )
            conn.execute(update, group)
        return outcomes


def _set_local(conn: Connection, lock_timeout_ms: int) -> None:
    """Set the batch transaction's lock timeout and plan choice (PostgreSQL).

    ``plan_cache_mode = force_custom_plan``: psycopg prepares a statement from its
    fifth run on a connection, and PostgreSQL then switches to a generic plan that
    cannot see the batch's arrays. With JEDI_TASKS' statistics older than its rows
    that plan joined ``unnest(...)`` by a nested loop over every ``defined`` task:
    2-9 s per batch of 500 with 10,000-30,000 such tasks, against ~0.03 s
    (docs/performance.md); planning each batch's few statements costs ~1 ms.
    Both settings are ``SET LOCAL`` (``set_config(..., true)``): they end with the
    transaction, in one round trip.
    """
    conn.execute(
        sa.text(
            "/* task_writers.apply_batch */ SELECT "
            "set_config('lock_timeout', :timeout, true), "
            "set_config('plan_cache_mode', 'force_custom_plan', true)"
        ),
        {"timeout": f"{int(lock_timeout_ms)}ms"},
    )


def _update_from_values(
    conn: Connection,
    tasks: sa.Table,
    columns: tuple[str, ...],
    params: list[dict[str, Any]],
) -> None:
    """Update many tasks in one statement (``UPDATE ... FROM unnest(arrays)``).

    One statement per batch instead of one per task, with one array parameter per
    column, so its text is the same for every batch: the rows stay locked for one
    round trip. The conditions are those of the per-task UPDATE.
    """
    names = ("b_id", "b_rule", *(f"v_{c}" for c in columns))
    kinds = ("jeditaskid", "splitrule", *columns)
    arrays = ", ".join(
        f"CAST(:{n} AS {array_type(tasks.c[k])})"
        for n, k in zip(names, kinds, strict=True)
    )
    table = table_name(tasks)
    sets = ", ".join(f"{c} = v.v_{c}" for c in columns)
    statement = sa.text(
        f"/* task_writers.apply_batch */ UPDATE {table} t SET {sets} "
        f"FROM unnest({arrays}) AS v({', '.join(names)}) "
        "WHERE t.jeditaskid = v.b_id AND t.status = :defined "
        "AND t.splitrule = v.b_rule AND t.lockedby IS NULL"
    )
    bound = {n: [p[n] for p in params] for n in names}
    conn.execute(statement, {**bound, "defined": DEFINED})


def _missing_reason(
    conn: Connection, tasks: sa.Table, task_id: int, reason: str
) -> str:
    """Tell a task JEDI holds (row locked, skipped) from one that does not exist."""
    exists = conn.execute(
        sa.select(tasks.c.jeditaskid).where(tasks.c.jeditaskid == task_id)
    ).first()
    if exists:
        return "task row locked by JEDI (skipped, not waited for): scouts run"
    return reason
