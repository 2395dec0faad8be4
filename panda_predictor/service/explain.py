"""Name the features that drove a prediction, cheaply enough to do on every request.

For an XGBoost model the explanation is the tree SHAP contribution of each feature to
the raw score (log-odds) of the *chosen* class of that task (``pred_contribs=True``):
positive values pushed the prediction towards the chosen class, negative ones away
from it; the features with the largest absolute contributions are returned. Other
model kinds (the Keras network) have no such per-row attribution; for them the list
is empty and ``method`` says so. See docs/service.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

#: How many features an explanation lists per target.
TOP_FEATURES = 5
METHOD_SHAP = "xgboost tree SHAP contribution to the chosen class (log-odds)"
METHOD_NONE = "not available for this model kind"


@dataclass(frozen=True)
class FeatureContribution:
    """One feature's value for the task and its contribution to the chosen class."""

    feature: str
    value: Any
    contribution: float

    def to_dict(self) -> dict[str, Any]:
        """Return the contribution as JSON-ready values."""
        return {
            "feature": self.feature,
            "value": self.value,
            "contribution": round(self.contribution, 4),
        }


def _plain(value: Any) -> Any:
    """Return a feature value as JSON: text, a rounded float, or None for NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, np.floating | float):
        return None if np.isnan(value) else round(float(value), 4)
    if isinstance(value, np.integer):
        return int(value)
    return str(value)


_ROW_BOOSTERS: dict[int, Any] = {}


def _one_thread(booster: Any) -> Any:
    """Return a one-thread copy of ``booster`` (made once per booster).

    For a handful of rows OpenMP's hand-off costs more than it saves, and a copy
    keeps concurrent request threads from changing each other's settings.
    """
    key = id(booster)
    entry = _ROW_BOOSTERS.get(key)
    if entry is None or entry[0] is not booster:
        copy = booster.copy()
        copy.set_param({"nthread": 1})
        entry = _ROW_BOOSTERS[key] = (booster, copy)
    return entry[1]


def _contributions(model: Any, matrix: Any) -> np.ndarray:
    """Return SHAP contributions, shape (rows, classes, features) without the bias."""
    booster = model.booster_ if matrix.num_row() > 64 else _one_thread(model.booster_)
    raw = np.asarray(booster.predict(matrix, pred_contribs=True))
    if raw.ndim == 2:  # binary: contributions to the positive class's log-odds
        positive = raw[:, :-1]
        return np.stack([-positive, positive], axis=1)
    return raw[:, :, :-1]


def explain(
    models: dict[str, Any],
    X: pd.DataFrame,
    chosen: dict[str, np.ndarray],
    top: int = TOP_FEATURES,
) -> tuple[dict[str, str], list[dict[str, list[FeatureContribution]]]]:
    """Return per target the method used, and per row the top features per target.

    Parameters
    ----------
    models:
        Fitted classifier per target (from the bundle).
    X:
        The feature frame the models predicted on.
    chosen:
        Chosen class per target and row (after the decision rule).
    top:
        How many features to list per target.
    """
    import xgboost as xgb

    methods: dict[str, str] = {}
    rows: list[dict[str, list[FeatureContribution]]] = [{} for _ in range(len(X))]
    matrices: dict[tuple[str, ...], Any] = {}  # one DMatrix per column order
    for target, model in models.items():
        if getattr(model, "kind", "") != "xgboost":
            methods[target] = METHOD_NONE
            for row in rows:
                row[target] = []
            continue
        methods[target] = METHOD_SHAP
        names = [str(c) for c in model.feature_names_in_]
        key = tuple(names)
        if key not in matrices:
            matrices[key] = xgb.DMatrix(X[names], enable_categorical=True, nthread=1)
        contribs = _contributions(model, matrices[key])
        for i, row in enumerate(rows):
            values = contribs[i, int(chosen[target][i])]
            order = np.argsort(-np.abs(values))[:top]
            row[target] = [
                FeatureContribution(
                    names[j], _plain(X[names[j]].iloc[i]), float(values[j])
                )
                for j in order
            ]
    return methods, rows
