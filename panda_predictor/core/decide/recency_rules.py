"""The field's recency rules, as experts beside the model.

Each rule reads a task's history features (and its request) and says a value; the
target's bins turn it into a class (:func:`expert_classes`), in the order of
:data:`~panda_predictor.core.decide.experts.EXPERTS` after the model. Which expert a
task follows is :mod:`panda_predictor.core.decide.experts`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from panda_predictor.core.decide.experts import EXPERTS
from panda_predictor.core.features.history import REQUEST_PREFIX
from panda_predictor.core.features.matrix_columns import MatrixColumns

#: Feature columns by name: a frame, or plain arrays (the one-task route, where
#: reading a pandas column costs more than the rule itself).
FeatureColumns: TypeAlias = pd.DataFrame | Mapping[str, np.ndarray]


def _column(frame: FeatureColumns, name: str) -> np.ndarray:
    if isinstance(frame, pd.DataFrame):
        if name not in frame.columns:
            return np.full(len(frame), np.nan)
        return frame[name].to_numpy(dtype=np.float64, na_value=np.nan)
    column = frame.get(name)
    if column is None:
        return np.full(len(next(iter(frame.values()), ())), np.nan)
    return np.asarray(column, dtype=np.float64)


def _columns(frame: FeatureColumns, names: Sequence[str]) -> np.ndarray:
    """Return the named columns as an (n, len(names)) float array (NaN: absent)."""
    if isinstance(frame, MatrixColumns):
        return frame.take(names)
    return np.column_stack([_column(frame, name) for name in names])


def _rule_inputs(target: str) -> tuple[str, ...]:
    """Return the feature columns the rules of ``target`` read, in
    :func:`rule_table`'s order."""
    user = f"hist_user_{target}_"
    key = f"hist_user_transformation_{target}_"
    return (
        user + "mean2",
        key + "p75",
        user + "p75",
        key + "p95",
        user + "p95",
        user + "max_ratio5",
        REQUEST_PREFIX + target,
    )


def rule_table(
    features: FeatureColumns, targets: Sequence[str], margin: float
) -> np.ndarray:
    """Return the recency rules' values of several targets at once.

    An (n, len(targets), 4) array, the rules in :data:`EXPERTS` order after the
    model; every value is computed as :func:`rule_values` says, each target's
    from its own columns (one pass for all targets: one task's serving pays the
    array operations once, not once per target).
    """
    names = [name for target in targets for name in _rule_inputs(target)]
    scale = 1.0 + margin
    if isinstance(features, MatrixColumns) and len(features.matrix) == 1:
        return _rule_row(features.first_row(names), len(targets), scale)
    V = _columns(features, names).reshape(-1, len(targets), 7)
    key_p75 = np.where(np.isnan(V[..., 1]), V[..., 2], V[..., 1]) * scale
    key_p95 = np.where(np.isnan(V[..., 3]), V[..., 4], V[..., 3]) * scale
    request = V[..., 6]
    ratio = V[..., 5] * np.where(request > 0, request, np.nan)
    return np.stack([V[..., 0], key_p75, key_p95, ratio], axis=-1)


def _rule_row(values: list[float], n_targets: int, scale: float) -> np.ndarray:
    """Return :func:`rule_table` of one task from its rule inputs (7 per target,
    in :func:`_rule_inputs` order): the same operations on plain floats."""
    out = []
    for t in range(n_targets):
        last2, key75, user75, key95, user95, ratio5, request = values[7 * t : 7 * t + 7]
        out.append(
            (
                last2,
                (user75 if math.isnan(key75) else key75) * scale,
                (user95 if math.isnan(key95) else key95) * scale,
                ratio5 * (request if request > 0 else math.nan),
            )
        )
    return np.array(out).reshape(1, n_targets, 4)


def rule_values(
    features: FeatureColumns, target: str, margin: float
) -> dict[str, np.ndarray]:
    """Return each recency rule's value for ``target`` from the feature columns.

    ``features`` holds the history features (``hist_<group>_<target>_<stat>``) and
    the request columns of the tasks; NaN where a rule has nothing to say:

    * ``last2``: the user's ``mean2``;
    * ``key_p75`` / ``key_p95``: the user's same transformation's percentile, else
      the user's, times ``1 + margin``;
    * ``ratio``: the user's ``max_ratio5`` times the task's request (> 0).
    """
    table = rule_table(features, [target], margin)[:, 0]
    return {name: table[:, j] for j, name in enumerate(EXPERTS[1:])}


def expert_classes(
    model_class: np.ndarray, rules: Mapping[str, np.ndarray] | np.ndarray, assign: Any
) -> np.ndarray:
    """Return an (n, len(EXPERTS)) class matrix; -1 where an expert abstains.

    ``rules`` are :func:`rule_values` (or one target's (n, 4) slice of
    :func:`rule_table`); ``assign`` maps values to classes, element by element
    (the target's ``TargetBins.assign``; NaN gives -1).
    """
    values = (
        rules
        if isinstance(rules, np.ndarray)
        else np.column_stack([rules[name] for name in EXPERTS[1:]])
    )
    out = np.empty((len(values), len(EXPERTS)), dtype=np.int64)
    out[:, 0] = model_class
    out[:, 1:] = assign(values)
    return out
