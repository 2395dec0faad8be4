"""The submit hook's ``publish`` output: one scout_prediction message per decided task.

With ``output: publish`` the hook writes nothing into JEDI_TASKS: each task decided
``applied`` or ``kept_scouts`` becomes a message (:mod:`.scout_prediction`) sent with
a receipt (:class:`~.publisher.StompPublisher`); only after its receipt is the task
audited in ``pp_prediction_audit`` (its ``written_at`` stays NULL, JEDI writes the
task) and the message recorded in ``pp_message_published``, in one transaction. A
task whose receipt never came has no audit row, so the next pass publishes it again
(at least once; the same content gives the same idempotency key). Tasks the hook
does not decide (kill switch, ``shadow``, ``held_back``) are audited as the
database output audits them and are not published.

With ``output: both`` the database output writes and audits first, then the tasks it
audited ``applied`` or ``kept_scouts`` are published as well (JEDI's plugin then
finds the scout rule gone and refuses the message, audited).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine import Engine

from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.db.audit_writer import TaskFailure
from panda_predictor.db.messages import Published, record_published
from panda_predictor.db.writer import WriteResult
from panda_predictor.messages.publisher import (
    BrokerUnavailable,
    OutgoingMessage,
    StompPublisher,
)
from panda_predictor.messages.scout_prediction import from_prediction
from panda_predictor.settings import Settings

#: Model name of the kill switch's predictions: never published.
LEGACY_MODEL = "legacy"

Write = Callable[[list[TaskPrediction]], tuple[WriteResult, list[TaskFailure]]]


def _publishable(prediction: TaskPrediction) -> bool:
    return (
        prediction.decision in ("applied", "kept_scouts")
        and prediction.model_name != LEGACY_MODEL
    )


def publish_batch(
    settings: Settings,
    engine: Engine,
    publisher: StompPublisher,
    predictions: list[TaskPrediction],
    write: Write,
) -> tuple[WriteResult, list[TaskFailure]]:
    """Publish (and for ``both`` also write) one batch; return what was audited.

    Raises
    ------
    BrokerUnavailable
        After recording the tasks whose receipt came: the rest stay eligible and
        the pass fails open.
    """
    if settings.output == "both":
        result, failures = write(predictions)
        audited = set(result.applied) | set(result.kept_scouts)
        chosen = [p for p in predictions if _publishable(p) and p.jeditaskid in audited]
    else:
        rest = [p for p in predictions if not _publishable(p)]
        result, failures = write(rest) if rest else (WriteResult(), [])
        chosen = [p for p in predictions if _publishable(p)]
    unique: dict[int, TaskPrediction] = {}
    for prediction in chosen:  # a task twice in one batch is published once
        unique.setdefault(prediction.jeditaskid, prediction)
    messages = {
        task_id: from_prediction(p, settings.message_ttl_seconds, settings.fixed_units)
        for task_id, p in unique.items()
    }
    outgoing = [
        OutgoingMessage(m.idempotency_key, m.task_id, m.to_json())
        for m in messages.values()
    ]
    error: BrokerUnavailable | None = None
    try:
        receipts = publisher.publish(outgoing)
    except BrokerUnavailable as exc:
        receipts, error = exc.done, exc
    confirmed = [
        Published(
            unique[task_id],
            m.idempotency_key,
            settings.broker_destination,
            receipts[m.idempotency_key],
            m.created_at,
            m.expires_at,
        )
        for task_id, m in messages.items()
        if m.idempotency_key in receipts
    ]
    audit_here = settings.output != "both"
    for task_id in record_published(
        engine,
        settings,
        confirmed,
        audit_tasks=audit_here,
        fixed_units=settings.fixed_units,
    ):
        decision = unique[task_id].decision
        (result.applied if decision == "applied" else result.kept_scouts).append(
            task_id
        )
    if error is not None:
        raise error
    return result, failures
