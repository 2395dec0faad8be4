"""Baseline predictors of a job's resource use from the same user's recent jobs.

These are the field's simple rules a model must beat (the user's own request, the
mean of the user's last two run times, the largest recent run-time/request ratio
times the request, a per-key history percentile, the majority class). All history is
*finished before submission*: a job j is history for job i only when
``finish_j < submit_i`` (finish = submit + wait + run), because nothing else is
known when job i is submitted. :func:`recency_stats` computes that history in one
pass; the model reuses the same statistics as features, so model and baselines see
exactly the same past.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

#: Past jobs of one key kept for the percentile baselines (a sliding window, as
#: Kubernetes' recommender keeps a bounded, recent histogram).
DEFAULT_WINDOW = 50
#: Jobs used by the "largest ratio" rule.
RATIO_JOBS = 5


@dataclass(frozen=True)
class RecencyStats:
    """Per job, statistics of the same key's jobs that finished before it was submitted.

    Every array has one entry per job; NaN where the key has no such history.
    """

    count: np.ndarray
    last: np.ndarray
    mean_last2: np.ndarray
    max_ratio5: np.ndarray
    p75: np.ndarray
    p95: np.ndarray


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


def recency_stats(
    submit: Any,
    finish: Any,
    key: Any,
    values: Any,
    request: Any = None,
    window: int = DEFAULT_WINDOW,
) -> RecencyStats:
    """Return, per job, the statistics of its key's jobs finished before its submission.

    ``last``/``mean_last2`` use the one/two most recently *finished* jobs;
    ``max_ratio5`` is the largest ``value / request`` of the last :data:`RATIO_JOBS`
    finished jobs with both known; ``p75``/``p95`` are percentiles (linear
    interpolation) of the last ``window`` finished values.

    :param submit: (n,) submit times.
    :param finish: (n,) finish times (NaN: unknown, never history).
    :param key: (n,) integer group codes (-1: no group, no history).
    :param values: (n,) the used resource (NaN: not recorded, not history).
    :param request: (n,) the requested amount, for the ratio; optional.
    :param window: how many recent values the percentiles use.
    """
    submit = _as_float(submit, "submit")
    n = submit.size
    finish = _as_float(finish, "finish", n)
    values = _as_float(values, "values", n)
    req = np.full(n, np.nan) if request is None else _as_float(request, "request", n)
    keys = np.asarray(key, dtype=np.int64)
    if keys.shape != (n,):
        raise ValueError(
            f"The 'key' field must be a 1-D array of {n} codes. "
            f"Got shape {keys.shape} instead."
        )
    if not isinstance(window, int) or window < 2:
        raise ValueError(f"The 'window' field must be an integer >= 2. Got {window!r}.")
    out = {k: np.full(n, np.nan) for k in RecencyStats.__dataclass_fields__}
    ratio = np.where(req > 0, values / np.where(req > 0, req, 1.0), np.nan)
    done = np.flatnonzero(np.isfinite(finish) & np.isfinite(values) & (keys >= 0))
    done = done[np.argsort(finish[done], kind="stable")]
    hist: dict[int, deque[int]] = {}
    counts: dict[int, int] = {}
    cache: dict[int, tuple[float, ...]] = {}
    pointer = 0
    for i in np.argsort(submit, kind="stable"):
        while pointer < done.size and finish[done[pointer]] < submit[i]:
            j = int(done[pointer])
            hist.setdefault(int(keys[j]), deque(maxlen=window)).append(j)
            counts[int(keys[j])] = counts.get(int(keys[j]), 0) + 1
            cache.pop(int(keys[j]), None)
            pointer += 1
        k = int(keys[i])
        if k < 0 or k not in hist:
            continue
        if k not in cache:
            jobs = list(hist[k])
            past = values[jobs]
            ratios = ratio[jobs[-RATIO_JOBS:]]
            ratios = ratios[np.isfinite(ratios)]
            p75, p95 = np.percentile(past, [75, 95])
            cache[k] = (
                float(counts[k]),
                float(past[-1]),
                float(past[-2:].mean()),
                float(ratios.max()) if ratios.size else np.nan,
                float(p75),
                float(p95),
            )
        for name, value in zip(out, cache[k], strict=True):
            out[name][i] = value
    return RecencyStats(**out)


def _fill(predicted: np.ndarray, fallback: Any) -> np.ndarray:
    """Return ``predicted`` with NaN replaced by ``fallback`` (scalar or per job)."""
    backup = np.broadcast_to(np.asarray(fallback, dtype=float), predicted.shape)
    return np.where(np.isfinite(predicted), predicted, backup)


def request_baseline(request: Any, fallback: Any) -> np.ndarray:
    """Predict the user's own request (``fallback`` where none was made)."""
    return _fill(_as_float(request, "request"), fallback)


def last_two_mean(stats: RecencyStats, fallback: Any) -> np.ndarray:
    """Predict the mean of the user's last two finished jobs (Tsafrir et al.'s rule)."""
    return _fill(stats.mean_last2, fallback)


def max_ratio_request(stats: RecencyStats, request: Any, fallback: Any) -> np.ndarray:
    """Predict the largest of the last five used/requested ratios times the request.

    Without a ratio (or a request) the request itself, then ``fallback``, is used.
    """
    req = _as_float(request, "request", stats.count.size)
    return _fill(_fill(stats.max_ratio5 * req, req), fallback)


def key_percentile(
    stats: RecencyStats, quantile: int, margin: float, fallback: Any
) -> np.ndarray:
    """Predict a percentile (75 or 95) of the key's past jobs plus a relative margin."""
    if quantile not in (75, 95):
        raise ValueError(f"The 'quantile' field must be 75 or 95. Got {quantile!r}.")
    if not margin >= 0:
        raise ValueError(f"The 'margin' field must be >= 0. Got {margin!r} instead.")
    past = stats.p75 if quantile == 75 else stats.p95
    return _fill(past * (1.0 + margin), fallback)


def majority_class(train_classes: Any, n: int) -> np.ndarray:
    """Predict the most frequent training class (ties: the larger class) for n jobs."""
    classes = np.asarray(train_classes, dtype=np.int64)
    classes = classes[classes >= 0]
    if classes.size == 0:
        raise ValueError("The training classes must hold at least one known class.")
    counts = np.bincount(classes)
    best = int(np.flatnonzero(counts == counts.max())[-1])
    return np.full(n, best, dtype=np.int64)
