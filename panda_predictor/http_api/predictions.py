"""``POST /v1/predictions``: predict task definitions; no database access.

History features (what similar tasks needed recently) are NaN unless the service
keeps a recent-history index (see :mod:`panda_predictor.http_api.history`).
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, current_app, jsonify, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import BadRequest

from panda_predictor.http_api.errors import ServiceUnavailable
from panda_predictor.http_api.metrics import DECISIONS
from panda_predictor.http_api.results import predict_tasks, reason_kind
from panda_predictor.http_api.schemas import PredictionsOut, parse_prediction_request
from panda_predictor.http_api.state import ModelUnavailable, ServiceState
from panda_predictor.taskdef import task_records

bp = Blueprint("predictions", __name__)


def json_body() -> Any:
    """Return the parsed JSON body; 400 naming the position when it is malformed."""
    data = request.get_data(cache=False)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(
            f"The request body must be JSON (a task definition or a list). Got "
            f"malformed JSON instead: {exc}."
        ) from None


def state() -> ServiceState:
    """Return the service state of the current app."""
    return current_app.extensions["panda_predictor"]


@bp.post("/v1/predictions")
def create_predictions() -> ResponseReturnValue:
    """Predict one task definition or a list; answer per task and target."""
    definitions = parse_prediction_request(json_body())
    service = state()
    try:
        predictor = service.predictor()
    except ModelUnavailable as exc:
        raise ServiceUnavailable(
            f"No model can predict right now ({exc}); keep the scouts."
        ) from None
    history = service.history.index if service.history is not None else None
    results = predict_tasks(predictor, task_records(definitions), history)
    for r in results:
        DECISIONS.labels(r["decision"], reason_kind(r["reason"])).inc()
    body = PredictionsOut.model_validate(
        {"predictions": results, "history_features": history is not None}
    )
    return jsonify(body.model_dump())
