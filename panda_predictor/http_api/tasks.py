"""``/v1/tasks/<jediTaskID>/prediction``: run the database hook for one task, or read
what it wrote.

``POST`` writes (it runs :class:`~panda_predictor.hook.SubmitHook` for the task) and
needs ``Authorization: Bearer <api_token>``; with no token configured writes are
disabled (503). ``GET`` reads the task's audit row and needs no token.
"""

from __future__ import annotations

import hmac

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from werkzeug.datastructures import WWWAuthenticate
from werkzeug.exceptions import Conflict, NotFound, Unauthorized

from panda_predictor.http_api.errors import ServiceUnavailable
from panda_predictor.http_api.predictions import state
from panda_predictor.http_api.results import prediction_dict
from panda_predictor.http_api.schemas import HookOut
from panda_predictor.http_api.state import ModelUnavailable

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


def _database_unavailable(exc: Exception) -> ServiceUnavailable:
    return ServiceUnavailable(f"The database cannot be used: {exc}")


@bp.post("/v1/tasks/<int:task_id>/prediction")
def predict_task(task_id: int) -> ResponseReturnValue:
    """Run the database hook for one task and answer what it wrote."""
    from panda_predictor.db.engine import DatabaseError
    from panda_predictor.db.reader import read_task_features
    from panda_predictor.hook import SubmitHook

    _require_token()
    service = state()
    try:
        engine = service.engine()
        found = read_task_features(engine, service.settings, [task_id])
    except DatabaseError as exc:
        raise _database_unavailable(exc) from None
    if found.empty:
        raise NotFound(f"The task jediTaskID={task_id} is not in JEDI_TASKS.")
    try:
        predictor = service.predictor()
    except ModelUnavailable as exc:
        raise ServiceUnavailable(
            f"No model can predict right now ({exc}); the task keeps its scouts."
        ) from None
    history = service.history.index if service.history is not None else None
    hook = SubmitHook(
        service.settings,
        engine=engine,
        predictor_factory=lambda: predictor,
        history_factory=lambda: history,
    )
    report = hook.run_once(task_ids=[task_id])
    if report.failure:
        raise ServiceUnavailable(
            f"The hook failed open for jediTaskID={task_id}; the task is untouched "
            f"and keeps its scouts: {report.failure}"
        )
    if not report.predictions:
        row = found.iloc[0]
        raise Conflict(
            f"The task jediTaskID={task_id} must be 'defined' or 'ready', scheduled "
            f"for scouts (US= in SPLITRULE) and not predicted before. Got status "
            f"{row['status']!r} and SPLITRULE {row['splitrule']!r} instead (or an "
            "audit row exists: GET this URL)."
        )
    outcome = "not_written"
    for name in ("applied", "kept_scouts", "moved_by_jedi"):
        if task_id in getattr(report, name):
            outcome = name
    body = HookOut.model_validate(
        {
            "jediTaskID": task_id,
            "written": outcome == "applied",
            "outcome": outcome,
            "prediction": prediction_dict(report.predictions[0]),
        }
    )
    return jsonify(body.model_dump())


@bp.get("/v1/tasks/<int:task_id>/prediction")
def read_task_prediction(task_id: int) -> ResponseReturnValue:
    """Return the audit row of a task: what was predicted, decided and written."""
    from panda_predictor.db.audit import read_audit
    from panda_predictor.db.engine import DatabaseError

    service = state()
    try:
        row = read_audit(service.engine(), service.settings, task_id)
    except DatabaseError as exc:
        raise _database_unavailable(exc) from None
    if row is None:
        raise NotFound(f"No prediction is recorded for jediTaskID={task_id}.")
    return jsonify({"jediTaskID": task_id, "audit": row})
