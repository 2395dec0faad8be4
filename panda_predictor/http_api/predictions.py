"""``POST /v1/predictions``: predict task definitions; no database access.

History features (what similar tasks needed recently) are NaN unless the service
keeps a recent-history index (see
:mod:`panda_predictor.serving.history_refresher`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import BadRequest

from panda_predictor.http_api.errors import RETRY_AFTER_SECONDS, ServiceUnavailable
from panda_predictor.http_api.input_limits import parse_json_body
from panda_predictor.http_api.metrics import DECISIONS
from panda_predictor.http_api.results import predict_tasks, reason_kind
from panda_predictor.http_api.schemas import PredictionsOut, parse_prediction_request
from panda_predictor.http_api.state import ModelUnavailable, ServiceState
from panda_predictor.serving.decision import served_rollout
from panda_predictor.taskdef import task_records

bp = Blueprint("predictions", __name__)


def json_body() -> Any:
    """Return the parsed JSON body; 400 when it is malformed or nested too deep."""
    return parse_json_body(request.get_data(cache=False))


def state() -> ServiceState:
    """Return the service state of the current app."""
    return current_app.extensions["panda_predictor"]


def model_unavailable(exc: ModelUnavailable, advice: str) -> ServiceUnavailable:
    """Return the 503 for ``exc``: why (safe to show), ``advice``, ``Retry-After``."""
    return ServiceUnavailable(
        f"No model can predict right now: {exc} {advice}",
        retry_after=RETRY_AFTER_SECONDS,
    )


def explain_requested() -> bool:
    """Return the ``explain`` query flag (default false); 400 when it is not a flag."""
    text = request.args.get("explain", "false").strip().lower()
    if text not in FLAGS:
        raise BadRequest(
            "The 'explain' query parameter must be one of "
            f"{', '.join(sorted(FLAGS))}. Got {text[:40]!r} instead."
        )
    return FLAGS[text]


#: Accepted spellings of the ``explain`` query flag.
FLAGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@bp.post("/v1/predictions")
def create_predictions() -> ResponseReturnValue:
    """Predict one task definition or a list; answer per task and target.

    Each target lists its top features only with ``?explain=true``: the tree SHAP
    explanations cost more than the prediction (docs/performance.md). In
    ``mode: shadow`` every decision is ``shadow`` and with ``rollout_share`` below 1
    the tasks outside the share are ``held_back``: callers (the JEDI refiner in
    HTTP mode) keep the scouts of both. A definition without ``jediTaskID`` is
    placed in the share by its list position, its id in the answer.
    """
    explain = explain_requested()
    definitions = parse_prediction_request(json_body())
    service = state()
    try:
        predictor = service.predictor()
    except ModelUnavailable as exc:
        raise model_unavailable(exc, "Keep the scouts.") from None
    history = service.history.index if service.history is not None else None
    # The kill switch only stops the hooks (they predict nothing); the service
    # still answers, in shadow mode and the rollout share like the hooks.
    results = predict_tasks(
        predictor,
        task_records(definitions),
        history,
        explain,
        served_rollout(service.settings),
    )
    for r in results:
        DECISIONS.labels(r["decision"], reason_kind(r["reason"])).inc()
    body = PredictionsOut.model_validate(
        {"predictions": results, "history_features": history is not None}
    )
    return jsonify(body.model_dump())
