"""Gate tolerances from the command line: short names, field names, bad values."""

from __future__ import annotations

import pytest

from model_registry.tolerances import TOLERANCE_NAMES, ToleranceError, parse_tolerances
from panda_predictor.errors import UserInputError


def test_short_and_field_names_give_the_same_field():
    assert parse_tolerances(["waste=0.5"]) == {"max_waste_rise": 0.5}
    assert parse_tolerances(["max_waste_rise=0.5"]) == {"max_waste_rise": 0.5}


def test_every_short_name_is_accepted_and_the_last_value_wins():
    fields = parse_tolerances([f"{name}=0.1" for name in TOLERANCE_NAMES])
    assert sorted(fields) == sorted(TOLERANCE_NAMES.values())
    assert parse_tolerances(["accuracy=0.1", " accuracy =0.3"]) == {
        "max_accuracy_drop": 0.3
    }


def test_only_the_noise_factor_may_be_negative():
    assert parse_tolerances(["floor_noise_factor=-1"]) == {"floor_noise_factor": -1.0}
    with pytest.raises(ToleranceError, match="'accuracy' must be a finite number >= 0"):
        parse_tolerances(["accuracy=-0.01"])


@pytest.mark.parametrize(
    "item, match",
    [
        ("accuracy", "must be NAME=VALUE"),
        ("speed=0.1", "must be NAME=VALUE with NAME one of accuracy, tail_recall"),
        ("accuracy=much", "Got 'much' instead"),
        ("waste=inf", "'waste' must be a finite number"),
        ("floor_noise_factor=-2", r"finite number >= -1\. Got '-2'"),
    ],
    ids=["no-value", "unknown-name", "not-a-number", "infinite", "below-minus-one"],
)
def test_bad_tolerances_are_user_errors(item, match):
    with pytest.raises(ToleranceError, match=match) as caught:
        parse_tolerances([item])
    assert isinstance(caught.value, UserInputError)
