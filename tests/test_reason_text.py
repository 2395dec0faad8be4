"""Reasons never print a comparison that reads false ("0.60 < 0.60")."""

from __future__ import annotations

import re

import numpy as np
import pytest

from panda_predictor.core.reason_text import compared, number
from panda_predictor.core.scout_policy import DecisionPolicy


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


def test_policy_reason_of_a_just_low_confidence_does_not_contradict():
    policy = DecisionPolicy(confidence_threshold=0.6)
    [low] = policy.decide_many({"ramcount": [1]}, {"ramcount": [0.5996]})
    assert low.decision == "kept_scouts"
    assert low.reason == "low confidence: ramcount 0.5996 < 0.60"
    [ok] = policy.decide_many({"ramcount": [1]}, {"ramcount": [0.6004]})
    assert ok.reason == "confident: lowest ramcount 0.6004 >= 0.60"
