"""Baselines and recency statistics against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core import baselines as bl

# submit, finish, value, request of one user's jobs (finish order: j0, j2, j1, ...)
SUBMIT = [0, 5, 20, 50, 100, 101]
FINISH = [10, 100, 30, 60, 200, 300]
VALUE = [10, 40, 6, 1, 1, 1]
REQUEST = [20, 50, 30, 100, 100, 10]


@pytest.fixture
def stats():
    return bl.recency_stats(SUBMIT, FINISH, np.zeros(6, dtype=int), VALUE, REQUEST)


def test_history_is_only_jobs_finished_before_submission(stats):
    assert np.isnan(stats.last[0]) and np.isnan(stats.count[1])
    assert stats.count[3] == 2 and stats.last[3] == 6  # j0 and j2, not j1 (t=100)
    assert stats.mean_last2[3] == 8.0
    assert stats.max_ratio5[3] == 0.5
    assert stats.p75[3] == pytest.approx(9.0) and stats.p95[3] == pytest.approx(9.8)
    # j1 finished at 100: not history at submit 100 (strict), history at 101
    assert stats.count[4] == 3 and stats.last[4] == 1  # j3 finished at 60
    assert stats.count[5] == 4 and stats.last[5] == 40  # j1 now in, latest


def test_baseline_predictions(stats):
    req = np.asarray(REQUEST, dtype=float)
    last2 = bl.last_two_mean(stats, req)
    assert last2[0] == 20 and last2[3] == 8.0
    ratio = bl.max_ratio_request(stats, req, 7.0)
    assert ratio[0] == 20 and ratio[3] == 50.0
    assert bl.max_ratio_request(stats, np.full(6, np.nan), 7.0)[0] == 7.0
    p75 = bl.key_percentile(stats, 75, 0.1, 3.0)
    assert p75[0] == 3.0 and p75[3] == pytest.approx(9.9)
    assert list(bl.request_baseline([1, np.nan], 5.0)) == [1.0, 5.0]
    assert list(bl.majority_class([0, 1, 1, 2, 2, -1], 3)) == [2, 2, 2]


def test_keys_keep_histories_apart():
    s = bl.recency_stats([0, 1, 10, 11], [1, 2, 12, 13], [0, 1, 0, -1], [5, 7, 9, 9])
    assert s.last[2] == 5 and np.isnan(s.last[3])


def test_group_codes_missing_means_no_group():
    codes = bl.group_codes(["a", "b", None, "a"], ["x", "x", "x", "y"])
    assert codes[2] == -1 and codes[0] != codes[3] and len(set(codes[[0, 1, 3]])) == 3


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: bl.recency_stats([0, 1], [1], [0, 0], [1, 1]), "'finish' field"),
        (lambda: bl.recency_stats([0], [1], [0], [1], window=1), "'window' field"),
        (
            lambda: bl.key_percentile(bl.recency_stats([0], [1], [0], [1]), 50, 0.1, 1),
            "'quantile' field must be 75 or 95",
        ),
        (lambda: bl.majority_class([-1], 2), "at least one known class"),
    ],
    ids=["length-mismatch", "window-too-small", "bad-quantile", "no-known-class"],
)
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
