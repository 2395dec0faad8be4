"""Name the features that drove a prediction, cheaply enough to do on every request.

For an XGBoost model the explanation is the tree SHAP contribution of each feature to
the raw score (log-odds) of the *chosen* class of that task (``pred_contribs=True``):
positive values pushed the prediction towards the chosen class, negative ones away
from it; the features with the largest absolute contributions are returned.

For a Keras network the explanation is occlusion: each feature in turn is set to
"unknown" (a numeric one to missing, which the network reads as its training mean
plus the missing flag; a categorical one to ``__unknown__``) and the contribution is
how much the log-probability of the chosen class falls. It costs one forward pass
per feature, all in one batch on the numpy forward pass (milliseconds). A model kind
with neither gets an empty list and ``method`` says so. See docs/service.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: How many features an explanation lists per target.
TOP_FEATURES = 5
METHOD_SHAP = "xgboost tree SHAP contribution to the chosen class (log-odds)"
METHOD_OCCLUSION = (
    "occlusion: fall of the chosen class's log-probability when the feature is "
    "set to unknown"
)
METHOD_NONE = "not available for this model kind"
#: Probability floor before taking logs, so a zero probability stays finite.
_EPS = 1e-12


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


def _matrix_for(model: Any, names: list[str], pipeline: Any, M: np.ndarray) -> Any:
    """Return a DMatrix of the code matrix ``M`` with the model's feature types."""
    from ..models.xgb import xgb  # already imported: the model is an XGBoost one

    types = ["c" if n in pipeline.dtypes_ else "q" for n in names]
    return xgb.DMatrix(
        M, feature_names=names, feature_types=types, enable_categorical=True, nthread=1
    )


def _display(pipeline: Any, name: str, value: float) -> Any:
    """Return a feature's value as a person reads it: category text or a number."""
    dtype = pipeline.dtypes_.get(name)
    if dtype is not None:
        return str(dtype.categories[int(value)])
    return _plain(float(value))


def occlusion(
    model: Any, M: np.ndarray, pipeline: Any, chosen: np.ndarray
) -> np.ndarray:
    """Return per row and feature the fall of log P(chosen class) when it is unknown.

    Shape (rows, features). All ``rows x features`` occluded copies go through
    ``predict_proba_matrix`` in one batch.
    """
    M = np.asarray(M, dtype=np.float32)
    n, k = M.shape
    picked = np.asarray(chosen, dtype=int)
    unknown = np.array(
        [
            0.0 if name in pipeline.dtypes_ else np.nan
            for name in pipeline.feature_names_out_
        ],
        dtype=np.float32,
    )
    copies = np.repeat(M[:, None, :], k, axis=1)  # (n, k features, k columns)
    diagonal = np.arange(k)
    copies[:, diagonal, diagonal] = unknown
    base = model.predict_proba_matrix(M)[np.arange(n), picked]
    occluded = model.predict_proba_matrix(copies.reshape(n * k, k)).reshape(n, k, -1)
    without = occluded[np.arange(n), :, picked]  # (n, k)
    return np.log(np.maximum(base, _EPS))[:, None] - np.log(np.maximum(without, _EPS))


def explain(
    models: dict[str, Any],
    M: np.ndarray,
    pipeline: Any,
    chosen: dict[str, np.ndarray],
    top: int = TOP_FEATURES,
) -> tuple[dict[str, str], list[dict[str, list[FeatureContribution]]]]:
    """Return per target the method used, and per row the top features per target.

    Parameters
    ----------
    models:
        Fitted classifier per target (from the bundle).
    M:
        The code matrix the models predicted on
        (``FeaturePipeline.transform_records``), columns in the pipeline's order.
    pipeline:
        The bundle's fitted feature pipeline (names, categories).
    chosen:
        Chosen class per target and row (after the decision rule).
    top:
        How many features to list per target.
    """
    names = list(pipeline.feature_names_out_)
    methods: dict[str, str] = {}
    rows: list[dict[str, list[FeatureContribution]]] = [{} for _ in range(len(M))]
    matrix = None
    for target, model in models.items():
        same_columns = [
            str(c) for c in getattr(model, "feature_names_in_", [])
        ] == names
        kind = getattr(model, "kind", "")
        if kind not in ("xgboost", "keras") or not same_columns:
            methods[target] = METHOD_NONE
            for row in rows:
                row[target] = []
            continue
        if kind == "keras":
            methods[target] = METHOD_OCCLUSION
            per_row = occlusion(model, M, pipeline, chosen[target])
        else:
            methods[target] = METHOD_SHAP
            if matrix is None:
                matrix = _matrix_for(model, names, pipeline, M)
            contribs = _contributions(model, matrix)
            picked = np.asarray(chosen[target], dtype=int)
            per_row = contribs[np.arange(len(M)), picked]
        for i, row in enumerate(rows):
            values = per_row[i]
            order = np.argsort(-np.abs(values))[:top]
            row[target] = [
                FeatureContribution(
                    names[j], _display(pipeline, names[j], M[i, j]), float(values[j])
                )
                for j in order
            ]
    return methods, rows
