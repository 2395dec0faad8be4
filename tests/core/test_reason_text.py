"""Reasons never print a comparison that reads false ("0.60 < 0.60")."""

from __future__ import annotations

import re

import numpy as np
import pytest

from panda_predictor.core.decide.scout_policy import reason_of
from panda_predictor.core.reason_text import compared, number


@pytest.mark.parametrize(
    "value, versus, decimals, expected",
    [
        (0.5996, 0.60, 2, "0.5996"),
        (0.6004, 0.60, 2, "0.6004"),
        (0.61, 0.60, 2, "0.61"),
        (0.60, 0.60, 2, "0.60"),
        (3999.9996, 4000.0, None, "3999.9996"),
        (float("nan"), 0.6, 2, "NaN"),
        (0.123, None, 2, "0.12"),
    ],
    ids=["below", "above", "apart", "equal", "general", "nan", "alone"],
)
def test_number_adds_digits_only_when_needed(value, versus, decimals, expected):
    assert number(value, versus, decimals) == expected


def test_compared_reads_true_for_many_close_values(seed):
    rng = np.random.default_rng(seed)
    for value in rng.uniform(0.59, 0.61, 2000):
        op = "<" if value < 0.6 else ">="
        text = compared("ramcount", value, op, 0.6)
        left, right = (float(x) for x in re.findall(r"\d+\.\d+", text))
        assert (left < right) if op == "<" else (left >= right), text


def test_policy_reason_of_a_cost_just_above_the_price_does_not_contradict():
    table = {
        "reason_kind": np.array(["costs_more", "cheaper"], dtype=object),
        "total_cost": np.array([0.5004, 0.4996]),
        "scouts_cost": np.array([0.5, 0.5]),
        "walltime_cost": np.array([0.5004, 0.4996]),
    }
    assert reason_of(table, 0, ["walltime"], 0.5).startswith(
        "scouts cost less: expected cost 0.5004 > 0.50 job runs"
    )
    assert reason_of(table, 1, ["walltime"], 0.5).startswith(
        "cheaper than scouts: expected cost 0.4996 <= 0.50 job runs"
    )
