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
(:func:`~panda_predictor.db.audit_writer.write_error_audits`) and its JEDI row is
never touched. What is written into a task's row, and the conditional UPDATE, are
:mod:`panda_predictor.db.task_updates`.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from panda_predictor.core.decide.rollout import HELD_BACK, SHADOW
from panda_predictor.core.domain.resource_type import ResourceType
from panda_predictor.core.domain.targets import TARGETS
from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.core.domain.units import database_value
from panda_predictor.db.audit_writer import audit_row, check_length, target_columns
from panda_predictor.db.early_remeasure import mark_written
from panda_predictor.db.engine import (
    DatabaseError,
    describe_error,
    dialect_of,
    get_panda_tables,
    get_plugin_tables,
)
from panda_predictor.db.resource_types import read_resource_types
from panda_predictor.db.task_effects import READY, lift_scout_caps
from panda_predictor.db.task_updates import (
    LOCKED_BY_JEDI,
    MALFORMED_SPLITRULE,
    WriteOptions,
    execute_updates,
    id_chunks,
    plan_update,
    preset_column_names,
)
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

#: Audit decision of a task JEDI moved on before the write-back (nothing written).
MOVED_BY_JEDI = "moved_by_jedi"


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


def write_predictions(
    engine: Engine | Connection,
    settings: Settings,
    predictions: Iterable[TaskPrediction],
    fixed_units: bool | None = None,
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
        True: write ``MBPerCoreFixed`` so JEDI never re-measures the ramcount;
        False: never; None: the unit each prediction carries (``MBPerCoreFixed``
        where training chose to keep the values). cputime stays plain
        ``HS06sPerEvent`` (see
        :func:`~panda_predictor.core.domain.units.database_value`).
    """
    panda = get_panda_tables(settings, engine)
    tables = (panda.jedi_tasks, panda.jedi_datasets, panda.jedi_dataset_contents)
    audit = get_plugin_tables(settings, engine).audit
    dialect = dialect_of(engine)
    options = WriteOptions(
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
            batch = list(predictions)
            _write_batch(conn, (*tables, audit), batch, options, types, result, at)
            at.text = "the early re-measurement marks"
            mark_written(conn, settings, batch, set(result.applied))
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


class _Position:
    """Which task (or statement) of the batch is being written, for error messages."""

    def __init__(self) -> None:
        self.text = "the batch"

    def __str__(self) -> str:
        return self.text


class _BatchPlan(NamedTuple):
    """The rows read for a batch's applied tasks and what to write into each."""

    #: The rows as read (and locked on PostgreSQL/Oracle), by id.
    current: dict[int, Any]
    #: The JEDI_TASKS values of each task to write, by id.
    planned: dict[int, dict[str, Any]]
    #: What else was done or kept for a planned task, for its audit reason.
    notes: dict[int, str]
    #: Why an applied task is not written, by id.
    refusals: dict[int, str]


def _write_batch(
    conn: Connection,
    tables: tuple[sa.Table, sa.Table, sa.Table, sa.Table],
    predictions: list[TaskPrediction],
    options: WriteOptions,
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
    if options.lock_timeout is not None:
        _set_lock_timeout(conn, options.lock_timeout)
    _check_targets(predictions, at)
    seen = _audited(conn, audit, [p.jeditaskid for p in predictions])
    # Made before any row is locked: JEDI may be waiting for the rows meanwhile.
    targets = _target_columns_of(predictions, seen, options.fixed_units, at)
    plan = _plan_batch(conn, tasks, predictions, seen, options, types, at)
    at.text = f"the JEDI_TASKS updates of {len(plan.planned)} tasks"
    written = execute_updates(conn, tasks, plan.planned, plan.current)
    for task_id in plan.planned.keys() - written:
        plan.refusals[task_id] = "moved by JEDI during the write-back"
    capped = sorted(i for i in written if plan.current[i].status == READY)
    at.text = f"the scout caps of {len(capped)} ready tasks"
    lift_scout_caps(conn, datasets, contents, capped)
    rows = _audit_rows(predictions, seen, plan, targets, audit, options, result, at)
    if rows:
        first, last = rows[0]["jeditaskid"], rows[-1]["jeditaskid"]
        at.text = f"the audit rows of jediTaskID={first}..{last}"
        conn.execute(_tag(sa.insert(audit), "writer.write_predictions"), rows)


def _check_targets(predictions: list[TaskPrediction], at: _Position) -> None:
    """Refuse a prediction of a target the plugin does not know."""
    for prediction in predictions:
        at.text = f"jediTaskID={prediction.jeditaskid}"
        for name in prediction.targets:
            if name not in TARGETS:
                raise ValueError(
                    f"The target must be one of {list(TARGETS)}. Got {name!r} instead."
                )
    at.text = "the batch"


def _target_columns_of(
    predictions: list[TaskPrediction],
    seen: set[int],
    fixed_units: bool | None,
    at: _Position,
) -> dict[int, dict[str, Any]]:
    """Return the audit target columns of each task not yet audited, by id.

    A task's first prediction in the batch is the one audited.
    """
    targets: dict[int, dict[str, Any]] = {}
    for prediction in predictions:
        if prediction.jeditaskid not in targets and prediction.jeditaskid not in seen:
            at.text = f"jediTaskID={prediction.jeditaskid}"
            targets[prediction.jeditaskid] = target_columns(
                prediction, fixed_units, database_value
            )
    at.text = "the batch"
    return targets


def _plan_batch(
    conn: Connection,
    tasks: sa.Table,
    predictions: list[TaskPrediction],
    seen: set[int],
    options: WriteOptions,
    types: list[ResourceType] | None,
    at: _Position,
) -> _BatchPlan:
    """Read (and lock) the applied tasks not yet audited and plan each one's write."""
    applied_ids = sorted(
        {p.jeditaskid for p in predictions if p.decision == "applied"} - seen
    )
    current = _current_rows(conn, tasks, applied_ids, options.lock)
    busy = _busy(conn, tasks, applied_ids, current) if options.lock else set()
    plan = _BatchPlan(
        current,
        planned={},
        notes={},
        refusals={
            task_id: f"{LOCKED_BY_JEDI}: row locked by another transaction"
            for task_id in busy
        },
    )
    first = set(seen)  # only a task's first prediction in the batch counts
    for prediction in predictions:
        task_id = prediction.jeditaskid
        if task_id in first:
            continue
        first.add(task_id)
        if prediction.decision != "applied" or task_id in busy:
            continue
        at.text = f"jediTaskID={task_id}"
        update = plan_update(tasks, prediction, options, current.get(task_id), types)
        if isinstance(update, str):
            plan.refusals[task_id] = update
            continue
        plan.planned[task_id] = update.values
        if update.note:
            plan.notes[task_id] = update.note
    return plan


def _audit_rows(
    predictions: list[TaskPrediction],
    seen: set[int],
    plan: _BatchPlan,
    targets: dict[int, dict[str, Any]],
    audit: sa.Table,
    options: WriteOptions,
    result: WriteResult,
    at: _Position,
) -> list[dict[str, Any]]:
    """Return the audit row of each task not yet audited; note outcomes in ``result``.

    A task JEDI holds gets no row (:func:`_decide`), so a later pass tries it again.
    """
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
        outcome = _decide(prediction, plan.refusals.get(task_id), result)
        if outcome is None:
            continue
        decision, reason, written_now = outcome
        check_length(audit, "reason", reason, task_id)  # the prediction's own
        if written_now and task_id in plan.notes:
            # The note is the plugin's own text: cut it rather than lose the row.
            limit = getattr(audit.c.reason.type, "length", None) or 400
            reason = f"{reason}; {plan.notes[task_id]}"[:limit]
            result.reasons[task_id] = reason
        row = audit_row(
            prediction,
            decision,
            reason,
            now if written_now else None,
            options.fixed_units,
            options.host,
            now,
            database_value,
            targets[task_id],
        )
        for name in ("model_name", "model_version", "reason", "host"):
            check_length(audit, name, row[name], task_id)
        rows.append(row)
    return rows


def _audited(conn: Connection, audit: sa.Table, ids: list[int]) -> set[int]:
    """Return which of ``ids`` already have an audit row."""
    seen: set[int] = set()
    for chunk in id_chunks(ids):
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
    for chunk in id_chunks(ids):
        query = (
            sa.select(
                tasks.c.jeditaskid,
                tasks.c.status,
                tasks.c.splitrule,
                tasks.c.lockedby,
                tasks.c.corecount,
                tasks.c.baseramcount,
                *(tasks.c[name] for name in preset_column_names()),
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
    for chunk in id_chunks(missing):
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


def _tag(statement: Any, name: str) -> Any:
    return statement.prefix_with(f"/* {name} */", dialect="*")
