"""Time-ordered, stratified and walk-forward splits: no future rows in training."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.assess.splits import (
    stratified_split,
    time_ordered_split,
    walk_forward_months,
)


def shuffled_times(rng: np.random.Generator, n: int = 500) -> pd.Series:
    """Return creation times over ~8 months in random order, with repeated values."""
    days = rng.integers(0, 240, n)
    hours = rng.integers(0, 3, n)  # few hours -> many exact ties
    return pd.Series(
        pd.Timestamp("2024-11-20")
        + pd.to_timedelta(days, "D")
        + pd.to_timedelta(hours, "h")
    )


def test_time_ordered_split_respects_time(seed):
    times = shuffled_times(np.random.default_rng(seed))
    split = time_ordered_split(times, 0.7, 0.15, 0.15)
    t = times.to_numpy()
    assert t[split.train].max() < t[split.val].min()
    assert t[split.val].max() < t[split.test].min()
    everything = np.concatenate(split)
    assert np.array_equal(np.sort(everything), np.arange(len(times)))
    assert abs(len(split.train) - 350) <= 15
    assert abs(len(split.test) - 75) <= 15


def test_time_ordered_split_keeps_ties_together():
    times = [1, 1, 1, 2, 2, 2, 2, 3, 3, 3]
    split = time_ordered_split(times, 0.5, 0.2, 0.3)
    # The 0.5 cut falls inside the "2" group, so it moves to the group's start.
    assert sorted(split.train.tolist()) == [0, 1, 2]
    assert sorted(split.val.tolist()) == [3, 4, 5, 6]
    assert sorted(split.test.tolist()) == [7, 8, 9]


def test_time_ordered_split_without_validation():
    split = time_ordered_split(np.arange(10.0)[::-1], train=0.8, val=0.0, test=0.2)
    assert split.val.size == 0
    assert sorted(split.test.tolist()) == [0, 1]


def test_time_ordered_split_accepts_strings_with_time_zones():
    times = ["2025-01-02T00:00:00+00:00", "2025-01-01T23:00:00-02:00", "2025-01-01"]
    split = time_ordered_split(times, 1 / 3, 1 / 3, 1 / 3)
    assert (split.train.tolist(), split.val.tolist(), split.test.tolist()) == (
        [2],
        [0],
        [1],
    )


@pytest.mark.parametrize(
    ("times", "fractions", "match"),
    [
        ([], (0.7, 0.15, 0.15), "non-empty 1-D"),
        ([1, 2, 3], (0.7, 0.2, 0.2), "must sum to 1"),
        ([1, 2, 3], (1.2, -0.1, -0.1), "'train' field must be a fraction"),
        ([1, 2, 3], (0.9, 0.1, 0.0), "'train' and 'test' fields must be positive"),
        ([5, 5, 5, 5], (0.5, 0.25, 0.25), "part of the time-ordered split is empty"),
        ([1.0, np.nan, 3.0], (0.5, 0.25, 0.25), "missing values"),
        ([True, False], (0.5, 0.0, 0.5), "numbers or datetimes"),
        (["yesterday", "today"], (0.5, 0.0, 0.5), "ISO 8601 strings"),
    ],
    ids=[
        "empty",
        "sum",
        "out-of-range",
        "no-test",
        "all-tied",
        "nan",
        "booleans",
        "unparseable",
    ],
)
def test_time_ordered_split_errors(times, fractions, match):
    with pytest.raises(ValueError, match=match):
        time_ordered_split(times, *fractions)


def test_stratified_split_keeps_class_shares(seed):
    rng = np.random.default_rng(seed)
    y = rng.choice(4, size=1000, p=[0.5, 0.3, 0.15, 0.05])
    train, test = stratified_split(y, test_size=0.2, seed=seed)
    assert np.intersect1d(train, test).size == 0
    assert train.size + test.size == y.size
    for cls in range(4):
        share = np.mean(y[test] == cls) - np.mean(y == cls)
        assert abs(share) < 0.01
    again = stratified_split(y, test_size=0.2, seed=seed)
    assert np.array_equal(again[1], test)


@pytest.mark.parametrize(
    ("y", "test_size", "match"),
    [
        ([], 0.2, "non-empty 1-D"),
        ([0, 1, 1], 0.0, "'test_size' field"),
        ([0, 1, 1], 1.0, "'test_size' field"),
        ([0, 1, 2], 0.2, "leaves a part empty"),
    ],
    ids=["empty", "zero", "one", "singletons"],
)
def test_stratified_split_errors(y, test_size, match):
    with pytest.raises(ValueError, match=match):
        stratified_split(y, test_size=test_size, seed=1)


def test_walk_forward_never_trains_on_the_future(seed):
    times = shuffled_times(np.random.default_rng(seed))
    folds = list(walk_forward_months(times))
    assert [m for m, _, _ in folds] == [
        "2024-12",
        "2025-01",
        "2025-02",
        "2025-03",
        "2025-04",
        "2025-05",
        "2025-06",
        "2025-07",
    ]
    t = times.to_numpy()
    for month, train, test in folds:
        start = pd.Period(month, "M").start_time.to_datetime64()
        assert t[train].max() < start
        assert np.all(pd.PeriodIndex(t[test], freq="M") == pd.Period(month, "M"))
        # train is everything before the month, nothing left out
        assert train.size == int(np.sum(t < start))


def test_walk_forward_with_explicit_months_skips_empty_ones():
    times = pd.to_datetime(["2024-01-05", "2024-01-20", "2024-03-01", "2024-04-30"])
    folds = list(
        walk_forward_months(times, first_test_month="2024-02", n_test_months=2)
    )
    assert [(m, tr.tolist(), te.tolist()) for m, tr, te in folds] == [
        ("2024-03", [0, 1], [2])
    ]


@pytest.mark.parametrize(
    ("times", "kwargs", "match"),
    [
        ([1, 2, 3], {}, "must hold datetimes"),
        (["2024-01-01", "2024-01-02"], {}, "at least 2 months"),
        (
            ["2024-01-01", "2024-02-02"],
            {"first_test_month": "2024-01"},
            "no earlier rows",
        ),
        (["2024-01-01", "2024-02-02"], {"first_test_month": "soon"}, "'YYYY-MM'"),
        (["2024-01-01", "2024-02-02"], {"n_test_months": 0}, "'n_test_months' field"),
    ],
    ids=["numbers", "one-month", "nothing-before", "bad-month", "zero-months"],
)
def test_walk_forward_errors(times, kwargs, match):
    with pytest.raises(ValueError, match=match):
        walk_forward_months(times, **kwargs)
