"""The baselines that need no history, and the grouping of job-log rows."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core.assess import baselines as bl


def test_request_majority_and_fallback():
    assert list(bl.request_baseline([1, np.nan], 5.0)) == [1.0, 5.0]
    assert list(bl.majority_class([0, 1, 1, 2, 2, -1], 3)) == [2, 2, 2]
    filled = bl.with_fallback(np.array([np.nan, 3.0]), np.array([7.0, 8.0]))
    assert list(filled) == [7.0, 3.0]


def test_group_codes_missing_means_no_group():
    codes = bl.group_codes(["a", "b", None, "a"], ["x", "x", "x", "y"])
    assert codes[2] == -1 and codes[0] != codes[3] and len(set(codes[[0, 1, 3]])) == 3


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: bl.request_baseline([[1.0]], 1.0), "'request' field must be a 1-D"),
        (lambda: bl.majority_class([-1], 2), "at least one known class"),
    ],
    ids=["request-not-1d", "no-known-class"],
)
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
