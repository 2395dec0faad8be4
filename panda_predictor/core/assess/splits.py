"""Split tasks into train, validation and test sets without leaking the future.

Tasks change over time (new releases, campaigns, transformations), so the honest test
is on the newest tasks with the model trained on older ones: :func:`time_ordered_split`
and :func:`walk_forward_months`. :func:`stratified_split` keeps the class shares equal
across parts, for the cases where time does not matter (e.g. tuning on small data).

Every function returns positional index arrays into the input, so callers can use
``frame.iloc[idx]`` or ``array[idx]``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import pandas as pd


class TimeSplit(NamedTuple):
    """Positional indices of the three parts, each in time order."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def _as_sortable_times(times: Any) -> np.ndarray:
    """Return ``times`` as a 1-D numeric or datetime64 array without missing values."""
    if isinstance(times, pd.Series | pd.Index):
        arr = times.to_numpy()
    else:
        arr = np.asarray(times)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            "The 'times' field must be a non-empty 1-D sequence of times. "
            f"Got shape {arr.shape} instead."
        )
    if arr.dtype == object or arr.dtype.kind in "OUSM":
        try:
            parsed = pd.to_datetime(pd.Series(arr), utc=True, format="ISO8601")
        except (ValueError, TypeError):
            raise ValueError(
                "The 'times' field must hold numbers, datetimes or ISO 8601 strings. "
                f"Got {arr[:3].tolist()}... instead."
            ) from None
        arr = parsed.dt.tz_localize(None).to_numpy()
    if arr.dtype.kind not in "iufM":
        raise ValueError(
            f"The 'times' field must hold numbers or datetimes. Got dtype {arr.dtype} "
            "instead."
        )
    if pd.isna(arr).any():
        raise ValueError(
            "The 'times' field must not contain missing values. "
            f"Got {int(pd.isna(arr).sum())} missing instead."
        )
    return arr


def _tie_safe_cut(sorted_times: np.ndarray, cut: int) -> int:
    """Move ``cut`` back to the start of the group of equal times it falls in."""
    if cut <= 0 or cut >= sorted_times.size:
        return cut
    return int(np.searchsorted(sorted_times, sorted_times[cut], side="left"))


def time_ordered_split(
    times: Any, train: float = 0.7, val: float = 0.15, test: float = 0.15
) -> TimeSplit:
    """Split by time: train on the oldest, validate on the next, test on the newest.

    Rows with equal times always land in the same part (a cut falling inside a group
    of equal times moves to the group's start), so the sizes are approximate.

    :param times: (n,) creation times (datetimes or numbers).
    :param train: share of the oldest rows used for training (> 0).
    :param val: share used for validation (>= 0).
    :param test: share of the newest rows used for testing (> 0).
    """
    fractions = {"train": train, "val": val, "test": test}
    for name, value in fractions.items():
        if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            raise ValueError(
                f"The '{name}' field must be a fraction in [0, 1]. "
                f"Got {value!r} instead."
            )
    if train <= 0 or test <= 0:
        raise ValueError(
            "The 'train' and 'test' fields must be positive fractions. "
            f"Got train={train!r}, test={test!r} instead."
        )
    if not math.isclose(train + val + test, 1.0, abs_tol=1e-9):
        raise ValueError(
            "The 'train', 'val' and 'test' fractions must sum to 1. "
            f"Got {train + val + test:g} instead."
        )
    arr = _as_sortable_times(times)
    order = np.argsort(arr, kind="stable")
    ordered = arr[order]
    n = arr.size
    cut_val = _tie_safe_cut(ordered, round(n * train))
    cut_test = _tie_safe_cut(ordered, max(cut_val, round(n * (train + val))))
    parts = TimeSplit(order[:cut_val], order[cut_val:cut_test], order[cut_test:])
    for name, idx in parts._asdict().items():
        if idx.size == 0 and fractions[name] > 0:
            raise ValueError(
                f"The '{name}' part of the time-ordered split is empty: {n} rows with "
                f"{np.unique(arr).size} distinct times cannot be split "
                f"{train:g}/{val:g}/{test:g}. Got too few rows or distinct times."
            )
    return parts


def stratified_split(
    y: Any, test_size: float = 0.15, seed: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Split at random with the same class shares in both parts.

    Each class gives ``round(n_class * test_size)`` rows to the test part (a class
    with one row stays in training). Returns sorted (train_idx, test_idx).

    :param y: (n,) class labels.
    :param test_size: share of each class put into the test part, in (0, 1).
    :param seed: seed of the shuffle, for repeatable splits.
    """
    if not isinstance(test_size, int | float) or not 0.0 < test_size < 1.0:
        raise ValueError(
            f"The 'test_size' field must be a fraction in (0, 1). Got {test_size!r} "
            "instead."
        )
    labels = np.asarray(y)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(
            "The 'y' field must be a non-empty 1-D sequence of labels. "
            f"Got shape {labels.shape} instead."
        )
    rng = np.random.default_rng(seed)
    test_parts = []
    for cls in np.unique(labels):
        members = np.flatnonzero(labels == cls)
        n_test = round(members.size * test_size) if members.size > 1 else 0
        test_parts.append(rng.permutation(members)[:n_test])
    test_idx = np.sort(np.concatenate(test_parts)).astype(int)
    train_idx = np.setdiff1d(np.arange(labels.size), test_idx)
    if test_idx.size == 0 or train_idx.size == 0:
        raise ValueError(
            f"The stratified split of {labels.size} rows with test_size={test_size:g} "
            "leaves a part empty. Got too few rows per class."
        )
    return train_idx, test_idx


def walk_forward_months(
    times: Any, first_test_month: str | None = None, n_test_months: int | None = None
) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Yield ``(month, train_idx, test_idx)``, testing each month on the past only.

    The training part is every row strictly before the month's first instant, the
    test part the rows inside the month. Months without rows are skipped.

    :param times: (n,) datetimes (naive, or aware and then compared in UTC).
    :param first_test_month: "YYYY-MM" of the first test month; default: the second
        month that has data, so the first fold has some training rows.
    :param n_test_months: how many calendar months to test; default: up to the last.
    """
    arr = _as_sortable_times(times)
    if arr.dtype.kind != "M":
        raise ValueError(
            f"The 'times' field must hold datetimes for monthly folds. Got dtype "
            f"{arr.dtype} instead."
        )
    months = pd.PeriodIndex(pd.DatetimeIndex(arr), freq="M")
    present = months.unique().sort_values()
    if first_test_month is None:
        if present.size < 2:
            raise ValueError(
                "Walk-forward folds need data in at least 2 months. "
                f"Got only {present[0]} instead."
            )
        start = present[1]
    else:
        try:
            start = pd.Period(first_test_month, freq="M")
        except (ValueError, TypeError):
            raise ValueError(
                "The 'first_test_month' field must look like 'YYYY-MM'. "
                f"Got {first_test_month!r} instead."
            ) from None
    if n_test_months is not None and (
        isinstance(n_test_months, bool)
        or not isinstance(n_test_months, int)
        or n_test_months < 1
    ):
        raise ValueError(
            "The 'n_test_months' field must be a positive integer. "
            f"Got {n_test_months!r} instead."
        )
    if not (months < start).any():
        raise ValueError(
            f"The first test month {start} has no earlier rows to train on. "
            f"Got data starting in {present[0]} instead."
        )
    last = present[-1] if n_test_months is None else start + (n_test_months - 1)
    return _folds(months, start, last)


def _folds(
    months: pd.PeriodIndex, start: pd.Period, last: pd.Period
) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Generate the folds from ``start`` to ``last`` inclusive."""
    ordinals = months.asi8
    for ordinal in range(start.ordinal, last.ordinal + 1):
        test_idx = np.flatnonzero(ordinals == ordinal)
        if test_idx.size == 0:
            continue
        train_idx = np.flatnonzero(ordinals < ordinal)
        yield str(pd.Period(ordinal=ordinal, freq="M")), train_idx, test_idx
