"""Build the submission-time features and the baseline predictions of a trace.

Only what is known when a job is submitted goes in: the SWF submission fields and
statistics of the same user's / user+executable's jobs that *finished* before the
submission (:func:`panda_predictor.core.baselines.recency_stats`). Wait time, run
time, CPU time and used memory of the job itself never reach a feature; a test
checks it. The baselines' own predictions are features too, so the model can learn
when to trust the recency rule and when not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from panda_predictor.core import baselines as bl
from panda_predictor.ingest.swf import (
    CATEGORICAL_FEATURES,
    NUMERIC_FEATURES,
    TRACE_TARGETS,
)
from panda_predictor.models.base import UNKNOWN_CATEGORY

#: The request column a target's used amount is compared with (none for memory when
#: the file does not record requested memory).
REQUEST_OF: dict[str, str] = {
    "walltime": "req_time_s",
    "cputime": "req_time_s",
    "ramcount": "req_memory_mb",
}
#: Margin added to the per-key percentile baselines.
KEY_MARGIN = 0.10
#: Most frequent values kept per categorical feature; the rest become
#: :data:`OTHER_CATEGORY`. Native categorical splits cost time in the number of
#: categories (CTC-SP2 has 12,303 executables), and rare values carry little signal
#: that the per-user/per-executable recency features do not already hold.
MAX_CATEGORIES = 64
#: The category of values outside the kept most frequent ones.
OTHER_CATEGORY = "__other__"


@dataclass
class TraceFeatures:
    """Features of every job plus, per target, the recency statistics."""

    X: pd.DataFrame
    user_stats: dict[str, bl.RecencyStats]
    key_stats: dict[str, bl.RecencyStats]
    user_key: np.ndarray
    user_exe_key: np.ndarray


def request_of(frame: pd.DataFrame, target: str) -> np.ndarray:
    """Return the job's request for ``target`` (NaN where not recorded)."""
    return frame[REQUEST_OF[target]].to_numpy(dtype=float)


def build_features(
    frame: pd.DataFrame,
    targets: list[str],
    fit_rows: np.ndarray | None = None,
    max_categories: int = MAX_CATEGORIES,
) -> TraceFeatures:
    """Return the model's features for every row of a task frame (see module doc).

    :param frame: rows of :func:`panda_predictor.ingest.swf.read_swf`, by submit time.
    :param targets: the targets the file records.
    :param fit_rows: rows whose value counts choose the kept categories (the
        training part; default all rows), so the test part never shapes a feature.
    :param max_categories: most frequent values kept per categorical feature.
    """
    if not isinstance(max_categories, int) or max_categories < 1:
        raise ValueError(
            "The 'max_categories' field must be an integer >= 1. "
            f"Got {max_categories!r} instead."
        )
    submit = frame["submit_s"].to_numpy(dtype=float)
    finish = frame["finish_s"].to_numpy(dtype=float)
    user_key = bl.group_codes(frame["user"])
    # A file without executables groups by user alone (missing is one value).
    exe = frame["executable"].astype(object).where(frame["executable"].notna(), "-")
    user_exe_key = bl.group_codes(frame["user"], exe)
    columns: dict[str, object] = {}
    for name in CATEGORICAL_FEATURES:
        col = frame[name]
        if col.notna().any():
            columns[name] = _capped_categorical(col, fit_rows, max_categories)
    for name in NUMERIC_FEATURES:
        if frame[name].notna().any():
            columns[name] = frame[name].to_numpy(dtype=float)
    when = frame["submit_time"]
    columns["hour"] = when.dt.hour.to_numpy(dtype=float)
    columns["weekday"] = when.dt.day_of_week.to_numpy(dtype=float)
    columns["user_gap_s"] = _gap_since_previous(submit, user_key)
    user_stats: dict[str, bl.RecencyStats] = {}
    key_stats: dict[str, bl.RecencyStats] = {}
    for target in targets:
        values = frame[TRACE_TARGETS[target][0]].to_numpy(dtype=float)
        request = request_of(frame, target)
        us = bl.recency_stats(submit, finish, user_key, values, request)
        ks = bl.recency_stats(submit, finish, user_exe_key, values, request)
        user_stats[target], key_stats[target] = us, ks
        columns[f"u_{target}_count"] = us.count
        columns[f"u_{target}_last"] = us.last
        columns[f"u_{target}_mean2"] = us.mean_last2
        columns[f"k_{target}_count"] = ks.count
        columns[f"k_{target}_p75"] = ks.p75
        columns[f"k_{target}_p95"] = ks.p95
        if np.isfinite(request).any():
            columns[f"u_{target}_ratio_req"] = us.max_ratio5 * request
    X = pd.DataFrame(columns, index=frame.index)
    return TraceFeatures(X, user_stats, key_stats, user_key, user_exe_key)


def _capped_categorical(
    col: pd.Series, fit_rows: np.ndarray | None, max_categories: int
) -> pd.Categorical:
    """Return ``col`` as a categorical of its most frequent fit-row values + other."""
    text = col.astype(object).where(col.isna(), col.astype(str))
    counted = text if fit_rows is None else text.iloc[fit_rows]
    kept = counted.dropna().value_counts(sort=True).index[:max_categories]
    kept = sorted(str(v) for v in kept)
    capped = text.where(text.isin(kept) | text.isna(), OTHER_CATEGORY)
    cats = [UNKNOWN_CATEGORY, OTHER_CATEGORY, *kept]
    return pd.Categorical(capped, categories=cats)


def _gap_since_previous(submit: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Return seconds since the same key's previous submission (known at submit)."""
    gap = np.full(submit.size, np.nan)
    order = np.lexsort((submit, key))
    same = key[order][1:] == key[order][:-1]
    diffs = np.diff(submit[order])
    gap[order[1:]] = np.where(same & (key[order][1:] >= 0), diffs, np.nan)
    return gap


def baseline_values(
    frame: pd.DataFrame,
    features: TraceFeatures,
    target: str,
    fallback: float,
) -> dict[str, np.ndarray]:
    """Return each value baseline's prediction for every row (majority is separate).

    Jobs without the needed history (or request) fall back to the request and then
    to ``fallback`` (the training median), so every job gets a prediction.
    """
    request = request_of(frame, target)
    default = np.where(np.isfinite(request), request, fallback)
    us, ks = features.user_stats[target], features.key_stats[target]
    out: dict[str, np.ndarray] = {}
    if np.isfinite(request).any():
        out["baseline:request"] = bl.request_baseline(request, fallback)
    out["baseline:user_last2_mean"] = bl.last_two_mean(us, default)
    if np.isfinite(request).any():
        out["baseline:user_max5_ratio"] = bl.max_ratio_request(us, request, fallback)
    out["baseline:key_p75"] = bl.key_percentile(ks, 75, KEY_MARGIN, default)
    out["baseline:key_p95"] = bl.key_percentile(ks, 95, KEY_MARGIN, default)
    return out
