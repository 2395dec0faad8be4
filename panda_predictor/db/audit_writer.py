"""Build the plugin's audit rows, and write those that come without a JEDI_TASKS write.

One row per task says what was predicted, decided and (``written_at``) written, and
why. :mod:`panda_predictor.db.writer` and :mod:`panda_predictor.db.messages` build
their rows here; a task whose prediction or write failed is audited ``error``
(:func:`write_error_audits`), a decision the JEDI refiner took elsewhere by
:func:`write_audit`. Neither touches JEDI_TASKS.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.core.domain.units import prediction_to_panda
from panda_predictor.db.early_remeasure import mark_written
from panda_predictor.db.engine import get_plugin_tables, translate_errors
from panda_predictor.settings import Settings

#: Audit decision of a task the plugin could not predict or write (nothing written).
ERROR = "error"


def panda_value(
    prediction: TargetPrediction, fixed_units: bool | None = None
) -> tuple[int, str]:
    """Return the value and unit PanDA stores for a target prediction.

    The one conversion of :func:`panda_predictor.core.domain.units.prediction_to_panda`
    (the float class value rounded up once; cputime below 10 HS06sPerEvent x1000
    in mHS06sPerEvent); ``fixed_units`` True writes the ``...Fixed`` units so later job
    measurements do not overwrite the prediction (False: never; None: the unit
    the decision chose).
    """
    return prediction_to_panda(prediction, fixed_units)


def _proba_json(probabilities: tuple[float, ...]) -> str:
    """Return the class probabilities as compact JSON (4 decimals, no spaces)."""
    return json.dumps(
        [round(float(p), 4) for p in probabilities], separators=(",", ":")
    )


def check_length(table: sa.Table, name: str, value: str | None, task_id: int) -> None:
    """Refuse text longer than its column (SQLite would store it silently)."""
    length = getattr(table.c[name].type, "length", None)
    if value is not None and length is not None and len(value) > length:
        raise ValueError(
            f"The '{name}' field of jediTaskID={task_id} must be at most {length} "
            f"characters. Got {len(value)} instead."
        )


def audit_row(
    prediction: TaskPrediction,
    decision: str,
    reason: str,
    written_at: datetime | None,
    fixed_units: bool | None,
    host: str,
    now: datetime,
    convert: Callable[[TargetPrediction, bool | None], tuple[int, str]] = panda_value,
    targets: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return a task's audit row; ``targets``: its :func:`target_columns`, if made."""
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
        targets = target_columns(prediction, fixed_units, convert)
    row.update(targets)
    return row


def target_columns(
    prediction: TaskPrediction,
    fixed_units: bool | None,
    convert: Callable[[TargetPrediction, bool | None], tuple[int, str]],
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
            conn.execute(_tag(seen_query, "audit_writer.write_error_audits")).scalars()
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
            conn.execute(
                _tag(sa.insert(audit), "audit_writer.write_error_audits"), rows
            )
    return [row["jeditaskid"] for row in rows]


def write_audit(
    engine: Engine | Connection,
    settings: Settings,
    prediction: TaskPrediction,
    written: bool,
    fixed_units: bool | None = None,
    convert: Callable[[TargetPrediction, bool | None], tuple[int, str]] = panda_value,
) -> bool:
    """Audit one decision taken elsewhere (the JEDI refiner); return False if known.

    Nothing in JEDI_TASKS is written: the refiner puts the values into the task
    parameter map itself, so ``written`` says whether it did (``written_at``);
    ``convert`` is the stored form it put there (as :func:`audit_row`).
    """
    audit = get_plugin_tables(settings, engine).audit
    now = datetime.now(UTC).replace(tzinfo=None)
    row = audit_row(
        prediction,
        prediction.decision,
        prediction.reason,
        now if written else None,
        fixed_units,
        socket.gethostname()[:128],
        now,
        convert,
    )
    for name in ("model_name", "model_version", "reason", "host"):
        check_length(audit, name, row[name], prediction.jeditaskid)
    seen_query = sa.select(audit.c.jeditaskid).where(
        audit.c.jeditaskid == sa.bindparam("task_id")
    )
    with translate_errors(engine), _transaction(engine) as conn:
        if conn.execute(
            _tag(seen_query, "audit_writer.write_audit"),
            {"task_id": prediction.jeditaskid},
        ).first():
            return False
        conn.execute(_tag(sa.insert(audit), "audit_writer.write_audit"), row)
        if written:
            mark_written(conn, settings, [prediction], {prediction.jeditaskid})
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
