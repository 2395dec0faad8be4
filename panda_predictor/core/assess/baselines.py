"""The field's non-history baselines and the grouping of job-log rows.

The recency rules (mean of the last two, key percentiles, largest ratio) are the
history statistics of :mod:`panda_predictor.core.features.history`, read by
:func:`panda_predictor.core.decide.recency_rules.rule_values`: one implementation
serves the model's features, the expert combination and the benchmark's baselines.
What is left here needs no history: the user's own request, the training majority
class, and the integer key of a user+executable burst for the replay.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def _as_float(values: Any, name: str, n: int | None = None) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or (n is not None and array.size != n):
        expected = "a 1-D array" if n is None else f"a 1-D array of {n} values"
        raise ValueError(
            f"The '{name}' field must be {expected}. Got shape {array.shape} instead."
        )
    return array


def group_codes(*columns: Any) -> np.ndarray:
    """Return one integer code per row for the combination of ``columns``; -1 if any
    of them is missing (a job with an unknown user has no history)."""
    frame = pd.DataFrame(
        {i: pd.Series(c).astype(object) for i, c in enumerate(columns)}
    )
    missing = frame.isna().any(axis=1).to_numpy()
    codes = frame.groupby(list(frame.columns), dropna=False, sort=False).ngroup()
    codes = codes.to_numpy()
    return np.where(missing, -1, codes).astype(np.int64)


def with_fallback(predicted: np.ndarray, fallback: Any) -> np.ndarray:
    """Return ``predicted`` with NaN replaced by ``fallback`` (scalar or per job)."""
    backup = np.broadcast_to(np.asarray(fallback, dtype=float), predicted.shape)
    return np.where(np.isfinite(predicted), predicted, backup)


def request_baseline(request: Any, fallback: Any) -> np.ndarray:
    """Predict the user's own request (``fallback`` where none was made)."""
    return with_fallback(_as_float(request, "request"), fallback)


def majority_class(train_classes: Any, n: int) -> np.ndarray:
    """Predict the most frequent training class (ties: the larger class) for n jobs."""
    classes = np.asarray(train_classes, dtype=np.int64)
    classes = classes[classes >= 0]
    if classes.size == 0:
        raise ValueError("The training classes must hold at least one known class.")
    counts = np.bincount(classes)
    best = int(np.flatnonzero(counts == counts.max())[-1])
    return np.full(n, best, dtype=np.int64)
