"""The history's rolling statistics: the same bits as pandas' groupby rolling."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.features.history import (
    RATIO_TASKS,
    WINDOW,
    _running_stats,
)


def _groupby_rolling(frame: pd.DataFrame, column: str, how: str, window: int):
    """The plain formula: pandas' own per-group rolling window."""
    rolling = frame.groupby("code", sort=False)[column].rolling(window, min_periods=1)
    out = rolling.max() if how == "max" else rolling.quantile(float(how))
    return out.reset_index(level=0, drop=True).sort_index().to_numpy()


@pytest.mark.parametrize("n_keys", [1, 7, 400])
def test_running_stats_match_groupby_rolling_bit_for_bit(n_keys):
    rng = np.random.default_rng(n_keys)
    n = 3_000
    codes = rng.integers(-1, n_keys, n)  # -1: a row without a key
    values = rng.lognormal(3.0, 1.5, n)
    tied = rng.random(n) < 0.5  # whole numbers repeat, as logged values do
    values[tied] = values[tied].round()
    values[rng.random(n) < 0.1] = np.nan  # a row without a value
    requests = np.where(rng.random(n) < 0.4, np.nan, rng.lognormal(4.0, 1.0, n))
    known_at = np.sort(rng.integers(0, 10**15, n)).astype("datetime64[ns]")

    stats = _running_stats(codes, known_at, values, requests)

    keep = (codes >= 0) & ~np.isnan(values)
    frame = pd.DataFrame(
        {"code": codes[keep], "last": values[keep], "_ratio": (values / requests)[keep]}
    )
    assert len(stats) == keep.sum()
    for column, source, how, window in (
        ("p75", "last", "0.75", WINDOW),
        ("p95", "last", "0.95", WINDOW),
        ("max_ratio5", "_ratio", "max", RATIO_TASKS),
    ):
        expected = _groupby_rolling(frame, source, how, window)
        got = stats[column].to_numpy()
        np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))
    # A window that reached past its key's first row would see another key's rows.
    first = stats.groupby("code").head(1)
    np.testing.assert_array_equal(first["p95"], first["last"])


def test_running_stats_of_no_rows_are_empty():
    empty = np.zeros(0)
    stats = _running_stats(
        np.zeros(0, np.int64), empty.astype("datetime64[ns]"), empty, empty
    )
    assert len(stats) == 0
    assert {"p75", "p95", "max_ratio5"} <= set(stats.columns)
