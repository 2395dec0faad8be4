"""Write predictions back into JEDI_TASKS and record every decision in the audit table.

All predictions of one call go in one short transaction: the caller predicts first,
outside any lock, and only then writes, so JEDI_TASKS rows are locked for the few
statements of the write (see docs/performance.md). A task's resource columns are
changed only if JEDI has not moved it on in the meantime (still ``defined``/``ready``
with its SPLITRULE unchanged and holding ``US=``) and does not hold it
(``LOCKEDBY`` is NULL); the conditional UPDATE makes that check and the write one
atomic step, so the plugin never races JobGenerator. A task JEDI holds is left
without an audit row, so a later pass tries it again.

The write never waits for JEDI: on PostgreSQL and Oracle the rows are read with
``FOR UPDATE SKIP LOCKED``, so a row another transaction locks (JEDI's own
``SELECT ... FOR UPDATE``) is skipped and reported ``locked_by_jedi`` like a set
``LOCKEDBY``; on PostgreSQL the transaction also gets a ``lock_timeout``
(``write_lock_timeout_seconds``) for any other lock it might meet. A plugin that
never waits for a lock cannot be half of a deadlock.

A SPLITRULE whose scout rule cannot be removed cleanly (``XUS=2``) is audited
``kept_scouts`` with a reason starting ``malformed_splitrule``: the task's data is
at fault, not JEDI, and its scouts run.

A written task is left as JEDI would leave it after its scouts
(:mod:`panda_predictor.db.task_effects`): a ``ready`` task's master dataset gets
the scout cap lifted, a new ramCount the resource type PanDA's rule gives, and
cputime a unit PanDA's re-measurement keeps right; each is noted in the audit
reason, as is why OUTDISKCOUNT/WORKDISKCOUNT stay.

A task whose prediction or write fails gets an audit row with decision ``error``
(:func:`write_error_audits`) and its JEDI row is never touched.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from panda_predictor.core.decide.rollout import HELD_BACK, SHADOW
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
from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.core.domain.units import database_value, prediction_to_panda
from panda_predictor.db.engine import (
    DatabaseError,
    describe_error,
    dialect_of,
    get_panda_tables,
    get_plugin_tables,
    translate_errors,
)
from panda_predictor.db.reader import ELIGIBLE_STATUSES
from panda_predictor.db.resource_types import read_resource_types
from panda_predictor.db.task_effects import (
    CPUTIME_NOT_FIXED,
    DISK_COUNTS_LEFT,
    READY,
    SCOUT_CAP_LIFTED,
    lift_scout_caps,
    reset_resource_type,
)
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

#: Audit decision of a task JEDI moved on before the write-back (nothing written).
MOVED_BY_JEDI = "moved_by_jedi"
#: Audit decision of a task the plugin could not predict or write (nothing written).
ERROR = "error"
#: Start of the refusal of a task JEDI holds (``LOCKEDBY`` set): not audited.
LOCKED_BY_JEDI = "locked by JEDI"
#: Start of the reason of a task whose SPLITRULE the plugin cannot edit safely.
MALFORMED_SPLITRULE = "malformed_splitrule"


@dataclass
class WriteResult:
    """Task ids per outcome of one :func:`write_predictions` call."""

    applied: list[int] = field(default_factory=list)
    kept_scouts: list[int] = field(default_factory=list)
    moved_by_jedi: list[int] = field(default_factory=list)
    already_audited: list[int] = field(default_factory=list)
    locked_by_jedi: list[int] = field(default_factory=list)
    shadow: list[int] = field(default_factory=list)
    held_back: list[int] = field(default_factory=list)
    #: Audited ``kept_scouts`` because the SPLITRULE cannot be edited safely.
    malformed_splitrule: list[int] = field(default_factory=list)
    #: Not written nor audited: the kill switch came on before their transaction.
    stopped_by_kill_switch: list[int] = field(default_factory=list)
    #: Why a task was not written as predicted (moved or locked by JEDI, a preset
    #: kept), by id: the caller logs it in the task's one line.
    reasons: dict[int, str] = field(default_factory=dict)

    def merge(self, other: WriteResult) -> None:
        """Add the outcomes of ``other`` (another part of the same batch)."""
        for name in (
            "applied",
            "kept_scouts",
            "moved_by_jedi",
            "shadow",
            "held_back",
            "malformed_splitrule",
            "stopped_by_kill_switch",
        ):
            getattr(self, name).extend(getattr(other, name))
        self.already_audited.extend(other.already_audited)
        self.locked_by_jedi.extend(other.locked_by_jedi)
        self.reasons.update(other.reasons)

    @property
    def audited(self) -> int:
        """Return how many audit rows this call wrote."""
        return (
            len(self.applied)
            + len(self.kept_scouts)
            + len(self.moved_by_jedi)
            + len(self.shadow)
            + len(self.held_back)
            + len(self.malformed_splitrule)
        )


def panda_value(
    prediction: TargetPrediction, fixed_units: bool = False
) -> tuple[int, str]:
    """Return the value and unit PanDA stores for a target prediction.

    The one conversion of :func:`panda_predictor.core.domain.units.prediction_to_panda`
    (the float class value rounded up once; cputime below 10 HS06sPerEvent x1000
    in mHS06sPerEvent); ``fixed_units`` writes the ``...Fixed`` units so later job
    measurements do not overwrite the prediction.
    """
    return prediction_to_panda(prediction, fixed_units)


def _proba_json(probabilities: tuple[float, ...]) -> str:
    """Return the class probabilities as compact JSON (4 decimals, no spaces)."""
    return json.dumps(
        [round(float(p), 4) for p in probabilities], separators=(",", ":")
    )


def _check_length(table: sa.Table, name: str, value: str | None, task_id: int) -> None:
    """Refuse text longer than its column (SQLite would store it silently)."""
    length = getattr(table.c[name].type, "length", None)
    if value is not None and length is not None and len(value) > length:
        raise ValueError(
            f"The '{name}' field of jediTaskID={task_id} must be at most {length} "
            f"characters. Got {len(value)} instead."
        )


def _audit_row(
    prediction: TaskPrediction,
    decision: str,
    reason: str,
    written_at: datetime | None,
    fixed_units: bool,
    host: str,
    now: datetime,
    convert: Callable[[TargetPrediction, bool], tuple[int, str]] = panda_value,
    targets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return a task's audit row; ``targets``: its :func:`_target_columns`, if made."""
    row: dict[str, Any] = {
        "jeditaskid": prediction.jeditaskid,
        "model_name": prediction.model_name,
        "model_version": prediction.model_version,
        "decision": decision,
        "reason": reason,
        "predicted_at": prediction.predicted_at or now,
        "written_at": written_at,
        "host": host,
    }
    if targets is None:
        targets = _target_columns(prediction, fixed_units, convert)
    row.update(targets)
    return row


def _target_columns(
    prediction: TaskPrediction,
    fixed_units: bool,
    convert: Callable[[TargetPrediction, bool], tuple[int, str]],
) -> dict[str, Any]:
    """Return the audit columns of a prediction's targets (the same whatever the
    decision, so the write-back makes them before it locks any row)."""
    columns: dict[str, Any] = {}
    for name, target in prediction.targets.items():
        value, unit = convert(target, fixed_units)
        columns.update(
            {
                f"{name}_class": target.class_index,
                f"{name}_value": value,
                f"{name}_unit": unit,
                f"{name}_confidence": float(target.confidence),
                f"{name}_proba": _proba_json(target.probabilities),
            }
        )
    return columns


def _preset_column_names() -> list[str]:
    """Return the JEDI_TASKS columns holding the requester's values and units."""
    names: list[str] = []
    for value, units in COLUMN_KEYS.values():
        names += [value, *((units,) if isinstance(units, str) else units)]
    return names


def _plan_update(
    tasks: sa.Table,
    prediction: TaskPrediction,
    options: _Options,
    row: Any = None,
    types: list[ResourceType] | None = None,
) -> _Planned | str:
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
    _check_length(tasks, "splitrule", values["splitrule"], task_id)
    notes = [note for note in (preset_note(plan),) if note]
    if "ramcount" in values:
        notes.append(reset_resource_type(values, row, types))
    if row.status == READY:
        notes.append(SCOUT_CAP_LIFTED)
    if options.fixed_units and "cputime" in values:
        notes.append(CPUTIME_NOT_FIXED)
    notes.append(DISK_COUNTS_LEFT)
    return _Planned(values, "; ".join(notes))


class _Planned(NamedTuple):
    """The JEDI_TASKS values of an applied task and a note for its audit reason."""

    values: dict[str, Any]
    note: str | None


def _execute_updates(
    conn: Connection,
    tasks: sa.Table,
    planned: dict[int, dict[str, Any]],
    current: dict[int, Any],
) -> set[int]:
    """Write every planned task with one executemany per set of columns.

    Each UPDATE is conditional: the task must still be eligible, unheld and carry
    the SPLITRULE read earlier (``current``, from :func:`_current_rows`), so JEDI's
    own moves win. One statement per column
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
    for chunk in _id_chunks(sorted(planned)):
        query = sa.select(tasks.c.jeditaskid, *(tasks.c[c] for c in columns)).where(
            tasks.c.jeditaskid.in_(chunk)
        )
        for row in conn.execute(_tag(query, "writer.write_predictions")):
            wanted = planned[int(row.jeditaskid)]
            if all(row._mapping[name] == value for name, value in wanted.items()):
                held.add(int(row.jeditaskid))
    return held


def write_predictions(
    engine: Engine | Connection,
    settings: Settings,
    predictions: Iterable[TaskPrediction],
    fixed_units: bool = False,
) -> WriteResult:
    """Write the applied predictions into JEDI_TASKS and audit all, in one transaction.

    Tasks that already have an audit row are skipped (so a retry is harmless). If
    anything fails, nothing is written and a :class:`DatabaseError` or ``ValueError``
    naming the jediTaskID propagates.

    Parameters
    ----------
    engine:
        Engine (a transaction is opened) or connection (a savepoint inside the
        caller's transaction, e.g. one holding the locks of ``find_eligible_tasks``;
        on PostgreSQL the ``lock_timeout`` set here then lasts until that
        transaction ends).
    settings:
        Settings naming the PanDA and plugin schemas.
    predictions:
        One prediction per task.
    fixed_units:
        Write ``MBPerCoreFixed`` so JEDI never re-measures the ramcount; cputime
        stays plain ``HS06sPerEvent`` (see
        :func:`~panda_predictor.core.domain.units.database_value`).
    """
    panda = get_panda_tables(settings, engine)
    tables = (panda.jedi_tasks, panda.jedi_datasets, panda.jedi_dataset_contents)
    audit = get_plugin_tables(settings, engine).audit
    dialect = dialect_of(engine)
    options = _Options(
        fixed_units=fixed_units,
        lock=dialect in ("postgresql", "oracle"),
        host=socket.gethostname()[:128],
        lock_timeout=(
            settings.write_lock_timeout_seconds if dialect == "postgresql" else None
        ),
        never_below_preset=settings.never_below_preset,
    )
    result = WriteResult()
    if isinstance(engine, Connection):
        conn = engine
        transaction = conn.begin_nested() if conn.in_transaction() else conn.begin()
    else:
        conn = engine.connect()
        transaction = conn.begin()
    at = _Position()
    try:
        with transaction:
            at.text = "the RESOURCE_TYPES table"
            types = read_resource_types(conn, settings)
            _write_batch(
                conn, (*tables, audit), list(predictions), options, types, result, at
            )
    except SQLAlchemyError as exc:
        error = describe_error(exc, conn)
        raise DatabaseError(
            f"Writing the prediction of {at} failed, nothing was written: {error}"
        ) from exc
    except (ValueError, KeyError) as exc:
        raise ValueError(
            f"Writing the prediction of {at} failed, nothing was written: {exc}"
        ) from exc
    finally:
        if not isinstance(engine, Connection):
            conn.close()
    # Each task's own line is the caller's (the hook logs one line per task).
    log.debug(
        "Wrote predictions: %d applied, %d kept scouts, %d moved by JEDI, "
        "%d already audited, %d locked by JEDI",
        len(result.applied),
        len(result.kept_scouts),
        len(result.moved_by_jedi),
        len(result.already_audited),
        len(result.locked_by_jedi),
    )
    return result


@dataclass(frozen=True)
class TaskFailure:
    """A task the plugin could not predict or write, and why (for its audit row)."""

    jeditaskid: int
    reason: str
    model_name: str = "-"
    model_version: str = "-"


def write_error_audits(
    engine: Engine | Connection, settings: Settings, failures: Iterable[TaskFailure]
) -> list[int]:
    """Audit each failed task with decision ``error``; return the ids audited.

    Only the audit table is written (the task's JEDI row stays as it is, so its
    scouts run), in one transaction; a task that already has an audit row keeps it.
    The reason is cut to the column's length rather than lose the row.
    """
    audit = get_plugin_tables(settings, engine).audit
    limit = getattr(audit.c.reason.type, "length", None) or 400
    now = datetime.now(UTC).replace(tzinfo=None)
    host = socket.gethostname()[:128]
    failures = list(failures)
    if not failures:
        return []
    seen_query = sa.select(audit.c.jeditaskid).where(
        audit.c.jeditaskid.in_([f.jeditaskid for f in failures])
    )
    with translate_errors(engine), _transaction(engine) as conn:
        seen = set(
            conn.execute(_tag(seen_query, "writer.write_error_audits")).scalars()
        )
        rows: list[dict[str, Any]] = [
            {
                "jeditaskid": f.jeditaskid,
                "model_name": f.model_name[:128],
                "model_version": f.model_version[:64],
                "decision": ERROR,
                "reason": f.reason[:limit],
                "predicted_at": now,
                "written_at": None,
                "host": host,
            }
            for f in failures
            if f.jeditaskid not in seen
        ]
        if rows:
            conn.execute(_tag(sa.insert(audit), "writer.write_error_audits"), rows)
    return [row["jeditaskid"] for row in rows]


def write_audit(
    engine: Engine | Connection,
    settings: Settings,
    prediction: TaskPrediction,
    written: bool,
    fixed_units: bool = False,
) -> bool:
    """Audit one decision taken elsewhere (the JEDI refiner); return False if known.

    Nothing in JEDI_TASKS is written: the refiner puts the values into the task
    parameter map itself, so ``written`` says whether it did (``written_at``).
    """
    audit = get_plugin_tables(settings, engine).audit
    now = datetime.now(UTC).replace(tzinfo=None)
    row = _audit_row(
        prediction,
        prediction.decision,
        prediction.reason,
        now if written else None,
        fixed_units,
        socket.gethostname()[:128],
        now,
    )
    for name in ("model_name", "model_version", "reason", "host"):
        _check_length(audit, name, row[name], prediction.jeditaskid)
    seen_query = sa.select(audit.c.jeditaskid).where(
        audit.c.jeditaskid == sa.bindparam("task_id")
    )
    with translate_errors(engine), _transaction(engine) as conn:
        if conn.execute(
            _tag(seen_query, "writer.write_audit"), {"task_id": prediction.jeditaskid}
        ).first():
            return False
        conn.execute(_tag(sa.insert(audit), "writer.write_audit"), row)
    return True


def _tag(statement: Any, name: str) -> Any:
    return statement.prefix_with(f"/* {name} */", dialect="*")


@contextmanager
def _transaction(bind: Engine | Connection) -> Iterator[Connection]:
    """Open a transaction on an engine, or a savepoint on a connection in one."""
    if isinstance(bind, Engine):
        with bind.begin() as conn:
            yield conn
    elif bind.in_transaction():
        with bind.begin_nested():
            yield bind
    else:
        with bind.begin():
            yield bind


@dataclass(frozen=True)
class _Options:
    """How :func:`_write_batch` writes: units, row locks, lock timeout, presets."""

    fixed_units: bool
    lock: bool
    host: str
    #: Seconds any lock wait may take (PostgreSQL); None: not set.
    lock_timeout: float | None
    never_below_preset: bool


class _Position:
    """Which task (or statement) of the batch is being written, for error messages."""

    def __init__(self) -> None:
        self.text = "the batch"

    def __str__(self) -> str:
        return self.text


def _write_batch(
    conn: Connection,
    tables: tuple[sa.Table, sa.Table, sa.Table, sa.Table],
    predictions: list[TaskPrediction],
    options: _Options,
    types: list[ResourceType] | None,
    result: WriteResult,
    at: _Position,
) -> None:
    """Handle a batch inside the transaction of :func:`write_predictions`.

    Set-based so the row locks are short: one query finds the tasks already
    audited, one reads (and on PostgreSQL/Oracle locks, in id order) every task to
    be written, one executemany of conditional UPDATEs per set of written columns
    and one multi-row audit INSERT. A row another transaction locks is skipped,
    never waited for (:func:`_current_rows`). ``tables`` are JEDI_TASKS,
    JEDI_DATASETS, JEDI_DATASET_CONTENTS and the audit table; a written ``ready``
    task's scout cap is lifted in the same transaction.
    """
    tasks, datasets, contents, audit = tables
    fixed_units, host = options.fixed_units, options.host
    if options.lock_timeout is not None:
        _set_lock_timeout(conn, options.lock_timeout)
    for prediction in predictions:
        at.text = f"jediTaskID={prediction.jeditaskid}"
        for name in prediction.targets:
            if name not in TARGETS:
                raise ValueError(
                    f"The target must be one of {list(TARGETS)}. Got {name!r} instead."
                )
    at.text = "the batch"
    seen = _audited(conn, audit, [p.jeditaskid for p in predictions])
    # Made before any row is locked: JEDI may be waiting for the rows meanwhile.
    # A task's first prediction in the batch is the one audited.
    targets: dict[int, dict[str, Any]] = {}
    for prediction in predictions:
        if prediction.jeditaskid not in targets and prediction.jeditaskid not in seen:
            at.text = f"jediTaskID={prediction.jeditaskid}"
            targets[prediction.jeditaskid] = _target_columns(
                prediction, fixed_units, database_value
            )
    at.text = "the batch"
    applied_ids = sorted(
        {p.jeditaskid for p in predictions if p.decision == "applied"} - seen
    )
    current = _current_rows(conn, tasks, applied_ids, options.lock)
    busy = _busy(conn, tasks, applied_ids, current) if options.lock else set()
    refusals: dict[int, str] = {
        task_id: f"{LOCKED_BY_JEDI}: row locked by another transaction"
        for task_id in busy
    }
    planned: dict[int, dict[str, Any]] = {}
    notes: dict[int, str] = {}
    first = set(seen)  # only a task's first prediction in the batch counts
    for prediction in predictions:
        task_id = prediction.jeditaskid
        if task_id in first:
            continue
        first.add(task_id)
        if prediction.decision != "applied" or task_id in busy:
            continue
        at.text = f"jediTaskID={task_id}"
        plan = _plan_update(tasks, prediction, options, current.get(task_id), types)
        if isinstance(plan, str):
            refusals[task_id] = plan
            continue
        planned[task_id] = plan.values
        if plan.note:
            notes[task_id] = plan.note
    at.text = f"the JEDI_TASKS updates of {len(planned)} tasks"
    written = _execute_updates(conn, tasks, planned, current)
    for task_id in planned.keys() - written:
        refusals[task_id] = "moved by JEDI during the write-back"
    capped = sorted(i for i in written if current[i].status == READY)
    at.text = f"the scout caps of {len(capped)} ready tasks"
    lift_scout_caps(conn, datasets, contents, capped)
    now = datetime.now(UTC).replace(tzinfo=None)
    rows: list[dict[str, Any]] = []
    for prediction in predictions:
        task_id = prediction.jeditaskid
        at.text = f"jediTaskID={task_id}"
        if task_id in seen:
            log.debug("jediTaskID=%d already audited, skipped", task_id)
            result.already_audited.append(task_id)
            continue
        seen.add(task_id)  # a task twice in one batch is written once
        outcome = _decide(prediction, refusals.get(task_id), result)
        if outcome is None:
            continue
        decision, reason, written_now = outcome
        _check_length(audit, "reason", reason, task_id)  # the prediction's own
        if written_now and task_id in notes:
            # The note is the plugin's own text: cut it rather than lose the row.
            limit = getattr(audit.c.reason.type, "length", None) or 400
            reason = f"{reason}; {notes[task_id]}"[:limit]
            result.reasons[task_id] = reason
        row = _audit_row(
            prediction,
            decision,
            reason,
            now if written_now else None,
            fixed_units,
            host,
            now,
            database_value,
            targets[task_id],
        )
        for name in ("model_name", "model_version", "reason", "host"):
            _check_length(audit, name, row[name], task_id)
        rows.append(row)
    if rows:
        first, last = rows[0]["jeditaskid"], rows[-1]["jeditaskid"]
        at.text = f"the audit rows of jediTaskID={first}..{last}"
        conn.execute(_tag(sa.insert(audit), "writer.write_predictions"), rows)


def _audited(conn: Connection, audit: sa.Table, ids: list[int]) -> set[int]:
    """Return which of ``ids`` already have an audit row."""
    seen: set[int] = set()
    for chunk in _id_chunks(ids):
        query = sa.select(audit.c.jeditaskid).where(audit.c.jeditaskid.in_(chunk))
        seen.update(conn.execute(_tag(query, "writer.write_predictions")).scalars())
    return seen


def _current_rows(
    conn: Connection, tasks: sa.Table, ids: list[int], lock: bool
) -> dict[int, Any]:
    """Read (and lock, in id order, skipping rows others lock) the tasks to write.

    With ``lock`` a row JEDI holds with its own ``SELECT ... FOR UPDATE`` is not
    returned (``SKIP LOCKED``) instead of making the write wait for JEDI; see
    :func:`_busy` for telling it from a task that does not exist.
    """
    current: dict[int, Any] = {}
    for chunk in _id_chunks(ids):
        query = (
            sa.select(
                tasks.c.jeditaskid,
                tasks.c.status,
                tasks.c.splitrule,
                tasks.c.lockedby,
                tasks.c.corecount,
                tasks.c.baseramcount,
                *(tasks.c[name] for name in _preset_column_names()),
            )
            .where(tasks.c.jeditaskid.in_(chunk))
            .order_by(tasks.c.jeditaskid)
        )
        if lock:
            query = query.with_for_update(skip_locked=True)
        for row in conn.execute(_tag(query, "writer.write_predictions")):
            current[int(row.jeditaskid)] = row
    return current


def _busy(
    conn: Connection, tasks: sa.Table, ids: list[int], current: dict[int, Any]
) -> set[int]:
    """Return the ids that exist but were skipped by ``SKIP LOCKED`` (row locked).

    A plain read takes no row lock and waits for none (MVCC on PostgreSQL and
    Oracle), so a task missing from ``current`` and found here is one another
    transaction holds: it is left for the next pass, not audited as not found.
    """
    missing = [task_id for task_id in ids if task_id not in current]
    busy: set[int] = set()
    for chunk in _id_chunks(missing):
        query = sa.select(tasks.c.jeditaskid).where(tasks.c.jeditaskid.in_(chunk))
        busy.update(
            int(task_id)
            for task_id in conn.execute(
                _tag(query, "writer.write_predictions")
            ).scalars()
        )
    return busy


def _set_lock_timeout(conn: Connection, seconds: float) -> None:
    """Bound any lock wait of this write transaction on PostgreSQL.

    ``SKIP LOCKED`` covers JEDI's rows; this covers the rest (an index page, the
    audit table's unique key) so a write never hangs behind another transaction.
    ``set_config(..., true)`` is ``SET LOCAL``: it ends with the transaction.
    """
    milliseconds = max(1, round(seconds * 1000))
    conn.execute(
        _tag(
            sa.select(sa.func.set_config("lock_timeout", f"{milliseconds}ms", True)),
            "writer.write_predictions",
        )
    )


def _decide(
    prediction: TaskPrediction, refused: str | None, result: WriteResult
) -> tuple[str, str, bool] | None:
    """Return (decision, reason, written) for a task's audit row, or None when it
    gets none (JEDI holds it: a later pass tries again). ``refused`` says why an
    applied task was not written (None: it was)."""
    task_id = prediction.jeditaskid
    if prediction.decision != "applied":
        # shadow and held_back (the rollout stage) are audited apart, never written.
        kept = {SHADOW: result.shadow, HELD_BACK: result.held_back}
        kept.get(prediction.decision, result.kept_scouts).append(task_id)
        return prediction.decision, prediction.reason, False
    if refused is None:
        result.applied.append(task_id)
        return prediction.decision, prediction.reason, True
    result.reasons[task_id] = refused
    if refused.startswith(LOCKED_BY_JEDI):
        result.locked_by_jedi.append(task_id)
        return None
    if refused.startswith(MALFORMED_SPLITRULE):
        result.malformed_splitrule.append(task_id)
        return "kept_scouts", refused, False
    result.moved_by_jedi.append(task_id)
    return MOVED_BY_JEDI, refused, False


def _id_chunks(ids: list[int], size: int = 1000) -> Iterator[list[int]]:
    # Oracle accepts at most 1000 values in an IN list.
    for start in range(0, len(ids), size):
        yield ids[start : start + size]
