"""Calibration errors and reliability tables on hand-made probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core.assess.calibration_error import (
    cumulative_calibration_error,
    expected_calibration_error,
    reliability_table,
)


def test_reliability_table_bins_the_confidences():
    proba = np.array([[0.95, 0.05], [0.95, 0.05], [0.55, 0.45], [0.55, 0.45]])
    y = np.array([0, 1, 0, 0])
    table = reliability_table(proba, y, n_bins=10)
    assert table.n.sum() == 4 and table.n[9] == 2 and table.n[5] == 2
    assert table.accuracy[9] == 0.5 and table.accuracy[5] == 1.0
    # Top-label ECE: half the rows 0.45 too confident, half 0.45 too shy.
    assert expected_calibration_error(proba, y, n_bins=10) == pytest.approx(0.45)
    assert table.to_dict()["accuracy"][0] is None  # an empty bin


def test_the_cumulative_error_pools_every_class_boundary():
    # Two classes: one boundary, P(y <= 0) = 0.8 stated, right 4 times in 5.
    proba = np.array([[0.8, 0.2]] * 5)
    y = np.array([0, 0, 0, 0, 1])
    assert cumulative_calibration_error(proba, y) == pytest.approx(0.0)
    assert cumulative_calibration_error(proba, np.ones(5, int)) == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: reliability_table(np.full((1, 2), 0.5), [0], kind="x"), "'kind'"),
        (lambda: reliability_table(np.full((1, 2), 0.5), [0], n_bins=0), "'n_bins'"),
        (lambda: expected_calibration_error(np.full((1, 2), 0.5), [2]), "'y' field"),
    ],
    ids=["bad-kind", "no-bins", "bad-label"],
)
def test_bad_input_names_the_field(call, match):
    with pytest.raises(ValueError, match=match):
        call()
