"""``GET /v1/models``: the loaded champion, per target its kind, bins and metrics."""

from __future__ import annotations

import math
from typing import Any

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from panda_predictor.http_api.predictions import model_unavailable, state
from panda_predictor.http_api.state import ModelUnavailable

bp = Blueprint("models", __name__)


def _edge(value: float) -> float | None:
    return None if math.isinf(value) else float(value)


@bp.get("/v1/models")
def models() -> ResponseReturnValue:
    """Describe the champion in use: name, version, source and each target."""
    service = state()
    try:
        predictor = service.predictor()
    except ModelUnavailable as exc:
        raise model_unavailable(exc, "Try again later.") from None
    bundle = predictor.bundle
    targets: dict[str, Any] = {}
    for name, model in bundle.models.items():
        bins = bundle.bins[name]
        prefix = f"{name}."
        targets[name] = {
            "kind": model.kind,
            "unit": bins.unit,
            "classes": [
                {
                    "index": i,
                    "label": label,
                    "lower": _edge(bins.range_of(i)[0]),
                    "upper": _edge(bins.range_of(i)[1]),
                    "value": float(bins.value_of(i)),
                }
                for i, label in enumerate(bins.labels)
            ],
            "metrics": {
                k[len(prefix) :]: v
                for k, v in bundle.metrics.items()
                if k.startswith(prefix)
            },
        }
    other = {
        k: v
        for k, v in bundle.metrics.items()
        if not any(k.startswith(f"{t}.") for t in bundle.models)
    }
    return jsonify(
        {
            "name": predictor.model_name,
            "version": predictor.model_version,
            "source": service.source,
            "bins_version": bundle.bins.version,
            "delay_price": predictor.policy.settings.delay_price,
            "targets": targets,
            "metrics": other,
        }
    )
