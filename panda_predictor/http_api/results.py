"""Predict task definitions and describe the outcome as plain, JSON-ready data.

Shared by ``POST /v1/predictions`` and ``panda-predictor predict`` so both show the
same thing: per task the decision and its reason, and per target the class, its
range and unit, the value that would be requested, the probabilities, the
confidence and the features that drove it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.http_api.explain import FeatureContribution, explain
from panda_predictor.serving.combination import ServingHistory
from panda_predictor.serving.decision import decide_records
from panda_predictor.serving.predictor import Predictor

#: The ``explanation`` of a target whose top features were not asked for.
NOT_REQUESTED = "not requested (add ?explain=true)"


def reason_kind(reason: str) -> str:
    """Return a short, bounded label for a decision reason (for metrics)."""
    text = reason.lower()
    for prefix, kind in (
        ("cheaper than scouts", "cheaper"),
        ("scouts cost less", "costs_more"),
        ("outside training domain", "outside_domain"),
        ("legacy", "legacy"),
        ("shadow", "shadow"),
        ("held back", "held_back"),
    ):
        if text.startswith(prefix):
            return kind
    return "other"


def target_dict(
    prediction: TaskPrediction,
    top: dict[str, list[FeatureContribution]],
    methods: dict[str, str],
) -> dict[str, dict[str, Any]]:
    """Return the per-target part of a prediction as plain values."""
    out = {}
    for name, t in prediction.targets.items():
        out[name] = {
            "class_index": t.class_index,
            "class_label": t.class_label,
            "lower": t.lower,
            "upper": t.upper,
            "unit": t.unit,
            "value": t.value,
            "confidence": round(t.confidence, 4),
            "probabilities": list(t.probabilities),
            "choice": t.choice,
            "top_features": [c.to_dict() for c in top.get(name, [])],
            "explanation": methods.get(name, ""),
        }
    return out


def prediction_dict(
    prediction: TaskPrediction,
    top: dict[str, list[FeatureContribution]] | None = None,
    methods: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Return one task's prediction (decision, model, targets) as plain values."""
    return {
        "jediTaskID": prediction.jeditaskid,
        "decision": prediction.decision,
        "reason": prediction.reason,
        "scouts": "skipped" if prediction.decision == "applied" else "kept",
        "model": {
            "name": prediction.model_name,
            "version": prediction.model_version,
        },
        "predicted_at": (
            prediction.predicted_at.isoformat() if prediction.predicted_at else None
        ),
        "early_remeasure": prediction.early_remeasure,
        "targets": target_dict(prediction, top or {}, methods or {}),
    }


def predict_tasks(
    predictor: Predictor,
    records: list[dict[str, Any]],
    history: Any = None,
    explain_features: bool = True,
    rollout: tuple[str, float] | None = None,
) -> list[dict[str, Any]]:
    """Predict task records (TASK_COLUMNS maps) and return one plain dict per task.

    The one decision (:func:`panda_predictor.serving.decision.decide_records`).
    With ``explain_features`` each target lists its top features (tree SHAP) on
    the records' code matrix; they cost more than the prediction itself, so the
    HTTP service computes them only on request (``?explain=true``).
    ``rollout`` is ``(mode, rollout_share)``: the decisions then go through
    :func:`panda_predictor.core.decide.rollout.route` (``shadow``, ``held_back``) as the
    hooks' do; None answers the model's own decision.
    """
    if not explain_features:
        return [
            prediction_dict(p, None, dict.fromkeys(p.targets, NOT_REQUESTED))
            for p in decide_records(predictor, records, history, rollout=rollout)
        ]
    features = predictor.bundle.features
    index = history.index if isinstance(history, ServingHistory) else None
    M = features.transform_records(records, index)
    predictions = decide_records(predictor, records, history, rollout=rollout)
    # A task refused by the task checks has no targets: its row explains class 0
    # and is not shown (prediction_dict lists the prediction's own targets).
    chosen = {
        t: np.array(
            [p.targets[t].class_index if t in p.targets else 0 for p in predictions]
        )
        for t in predictor.bundle.models
    }
    methods, top = explain(predictor.bundle.models, M, features, chosen)
    return [
        prediction_dict(p, row, methods)
        for p, row in zip(predictions, top, strict=True)
    ]
