"""``/v1/tasks/<jediTaskID>/prediction``: run the database hook for one task, or read
what it wrote.

``POST`` writes (it runs :class:`~panda_predictor.hook.submit.SubmitHook` for the
task) and needs ``Authorization: Bearer <api_token>``; with no token configured
writes are disabled (503). ``GET`` reads the task's audit row and needs no token.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any, NoReturn

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from werkzeug.datastructures import WWWAuthenticate
from werkzeug.exceptions import (
    Conflict,
    NotFound,
    Unauthorized,
    UnprocessableEntity,
)

from panda_predictor.http_api.errors import RETRY_AFTER_SECONDS, ServiceUnavailable
from panda_predictor.http_api.input_limits import parse_task_id
from panda_predictor.http_api.predictions import model_unavailable, state
from panda_predictor.http_api.results import prediction_dict
from panda_predictor.http_api.schemas import HookOut
from panda_predictor.http_api.state import ModelUnavailable

log = logging.getLogger(__name__)

bp = Blueprint("tasks", __name__)


def _require_token() -> None:
    """Raise 503 when writes are disabled, 401 when the bearer token is wrong."""
    token = state().settings.api_token
    if not token:
        raise ServiceUnavailable(
            "Writes are disabled: no api_token is configured. Set "
            "PANDA_PREDICTOR_API_TOKEN to enable POST /v1/tasks/<id>/prediction."
        )
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        raise Unauthorized(
            "The 'Authorization' header must be 'Bearer <api_token>'. Got "
            f"{'no header' if not scheme else 'a wrong or malformed token'} instead.",
            www_authenticate=WWWAuthenticate("bearer"),
        )


def _database_unavailable(exc: Exception, task_id: int) -> ServiceUnavailable:
    """Log why the database failed; return a 503 that does not say where it is."""
    log.error("jediTaskID=%d: database unavailable: %s", task_id, exc)
    state().reset_engine()  # reconnect on the next request
    return ServiceUnavailable(
        "The database cannot be used right now (the reason is in the service log).",
        retry_after=RETRY_AFTER_SECONDS,
    )


@bp.post("/v1/tasks/<task_id>/prediction")
def predict_task(task_id: str) -> ResponseReturnValue:
    """Run the database hook for one task and answer what it wrote."""
    from panda_predictor.db.engine import DatabaseError
    from panda_predictor.db.reader import read_task_features
    from panda_predictor.hook.submit import SubmitHook

    _require_token()
    jeditaskid = parse_task_id(task_id)
    service = state()
    try:
        engine = service.engine()
        found = read_task_features(engine, service.settings, [jeditaskid])
    except DatabaseError as exc:
        raise _database_unavailable(exc, jeditaskid) from None
    if found.empty:
        raise NotFound(f"The task jediTaskID={jeditaskid} is not in JEDI_TASKS.")
    try:
        predictor = service.predictor()
    except ModelUnavailable as exc:
        raise model_unavailable(exc, "The task keeps its scouts.") from None
    history = service.history.index if service.history is not None else None
    hook = SubmitHook(
        service.settings,
        engine=engine,
        predictor_factory=lambda: predictor,
        history_factory=lambda: history,
    )
    report = hook.run_once(task_ids=[jeditaskid])
    if report.failure:
        log.error("jediTaskID=%d: hook failed open: %s", jeditaskid, report.failure)
        raise ServiceUnavailable(
            f"The hook failed open for jediTaskID={jeditaskid}; the task is "
            "untouched and keeps its scouts (the reason is in the service log).",
            retry_after=RETRY_AFTER_SECONDS,
        )
    if jeditaskid in report.errors:
        raise UnprocessableEntity(
            f"The task jediTaskID={jeditaskid} could not be predicted or written: "
            f"{_audited_reason(service, jeditaskid)}. It is audited with decision "
            "'error', its JEDI row is untouched and it keeps its scouts."
        )
    if jeditaskid in report.locked_by_jedi:
        raise _JediHoldsTheTask(
            f"JEDI holds the task jediTaskID={jeditaskid} (LOCKEDBY is set or its "
            "row is locked): nothing was written. Try again once JEDI releases it."
        )
    if not report.predictions:
        _refuse_not_eligible(service, jeditaskid)
    outcome = "not_written"
    for name in ("applied", "kept_scouts", "moved_by_jedi", "shadow", "held_back"):
        if jeditaskid in getattr(report, name):
            outcome = name
    if jeditaskid in report.malformed_splitrule:
        outcome = "kept_scouts"  # audited so; the reason names the SPLITRULE
    body = HookOut.model_validate(
        {
            "jediTaskID": jeditaskid,
            "written": outcome == "applied",
            "outcome": outcome,
            "prediction": prediction_dict(report.predictions[0]),
        }
    )
    return jsonify(body.model_dump())


class _JediHoldsTheTask(Conflict):
    """409 with ``Retry-After``: JEDI holds the task, a later call may succeed."""

    def get_headers(self, *args: Any, **kwargs: Any) -> list[tuple[str, str]]:
        headers = super().get_headers(*args, **kwargs)
        return [*headers, ("Retry-After", str(RETRY_AFTER_SECONDS))]


def _refuse_not_eligible(service: Any, jeditaskid: int) -> NoReturn:
    """Answer why the hook did not predict the task: 409, with Retry-After if JEDI
    holds it (the rules are those of ``hook --task-id``, :mod:`db.eligibility`)."""
    from panda_predictor.db.eligibility import LOCKED, why_not_eligible

    with service.engine().connect() as conn:
        why = why_not_eligible(conn, service.settings, [jeditaskid])
    if why and why[0].rule == LOCKED:
        raise _JediHoldsTheTask(
            f"JEDI holds the task jediTaskID={jeditaskid} (LOCKEDBY is set or its "
            "row is locked): nothing was written. Try again once JEDI releases it."
        )
    reason = (
        why[0].reason
        if why
        else "another hook claimed it or JEDI changed it meanwhile; try again"
    )
    raise Conflict(
        f"The task jediTaskID={jeditaskid} is not eligible for prediction: {reason}."
    )


def _audited_reason(service: Any, jeditaskid: int) -> str:
    """Return the reason of a task's audit row (or a pointer to the log)."""
    from panda_predictor.db.audit import read_audit

    row = read_audit(service.engine(), service.settings, jeditaskid)
    if row is None or not row.get("reason"):
        return "the reason is in the service log"
    return str(row["reason"])


@bp.get("/v1/tasks/<task_id>/prediction")
def read_task_prediction(task_id: str) -> ResponseReturnValue:
    """Return the audit row of a task: what was predicted, decided and written."""
    from panda_predictor.db.audit import read_audit
    from panda_predictor.db.engine import DatabaseError

    jeditaskid = parse_task_id(task_id)
    service = state()
    try:
        row = read_audit(service.engine(), service.settings, jeditaskid)
    except DatabaseError as exc:
        raise _database_unavailable(exc, jeditaskid) from None
    if row is None:
        raise NotFound(f"No prediction is recorded for jediTaskID={jeditaskid}.")
    return jsonify({"jediTaskID": jeditaskid, "audit": row})
