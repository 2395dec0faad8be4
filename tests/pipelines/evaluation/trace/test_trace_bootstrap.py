"""The day-block bootstrap of a macro-F1 lead and of an ECE."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core.assess.calibration_error import expected_calibration_error
from panda_predictor.core.assess.evaluation import evaluate_target
from pipelines.evaluation.trace.bootstrap import (
    _daily_matrices,
    _macro_f1,
    ece_interval,
    margin_interval,
)


def test_macro_f1_of_a_matrix_matches_evaluate_target(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, 200)
    pred = np.where(rng.random(200) < 0.6, y, rng.integers(0, 4, 200))
    y[y == 2] = 1  # class 2 only predicted, never true; class 3 only predicted
    cm = _daily_matrices(np.zeros(200, dtype=int), 1, y, pred, 4)[0]
    expected = evaluate_target(y, pred, n_classes=4).macro_f1
    assert _macro_f1(cm) == pytest.approx(expected)


def test_a_clear_lead_holds_and_a_coin_flip_does_not(seed):
    rng = np.random.default_rng(seed)
    n, days = 3000, np.repeat(np.arange(60), 50)
    y = rng.integers(0, 3, n)
    good = np.where(rng.random(n) < 0.9, y, (y + 1) % 3)
    poor = np.where(rng.random(n) < 0.5, y, (y + 1) % 3)
    clear = margin_interval(days, y, good, poor, 3, names=("model:m", "baseline:b"))
    assert clear.low > 0.3 and clear.margin > clear.low and clear.n_days == 60
    assert "lead holds" in clear.describe() and "model:m" in clear.describe()
    twin = np.where(rng.random(n) < 0.5, y, (y + 1) % 3)
    unsure = margin_interval(days, y, twin, poor, 3)
    assert unsure.low < 0 < unsure.high and "lead not sure" in unsure.describe()


def test_days_are_resampled_as_blocks():
    # Two days: the model is perfect on day 0 and always wrong on day 1. A job
    # bootstrap would give a tight interval; resampling days gives both extremes.
    y = np.array([0, 1] * 50 + [0, 1] * 50)
    model = np.concatenate([y[:100], 1 - y[100:]])
    base = np.zeros(200, dtype=int)
    days = np.repeat([0, 1], 100)
    lead = margin_interval(days, y, model, base, 2, n_resamples=400)
    assert lead.low < -0.2 and lead.high > 0.6


def test_margin_interval_needs_jobs():
    with pytest.raises(ValueError, match="at least one job"):
        margin_interval([], [], [], [], 2)


def test_the_ece_of_the_interval_is_the_reported_ece(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    proba = rng.dirichlet(np.ones(4) * 0.7, n)
    y = rng.integers(0, 4, n)
    got = ece_interval(rng.integers(0, 40, n), proba, y)
    assert got.ece == expected_calibration_error(proba, y)
    assert got.low <= got.ece <= got.high and got.n_days == 40
    # One day resamples into itself: every resample's ECE is the figure's.
    one_day = ece_interval(np.zeros(n), proba, y, n_resamples=20)
    assert one_day.low == pytest.approx(one_day.ece, abs=1e-12)
    assert one_day.high == pytest.approx(one_day.ece, abs=1e-12)


def overconfident(rng, n, conf, hit_rate):
    """Return (proba, y): top class ``conf`` sure, right ``hit_rate`` of the time."""
    proba = np.column_stack([np.full(n, conf), np.full(n, 1 - conf)])
    y = np.where(rng.random(n) < hit_rate, 0, 1)
    return proba, y


def test_a_calibrated_part_is_told_from_an_overconfident_one(seed):
    rng = np.random.default_rng(seed)
    days = np.repeat(np.arange(50), 60)
    calibrated = ece_interval(days, *overconfident(rng, days.size, 0.8, 0.8))
    assert calibrated.high < 0.04
    wrong = ece_interval(days, *overconfident(rng, days.size, 0.9, 0.7))
    assert wrong.low > 0.15 and wrong.ece == pytest.approx(0.2, abs=0.03)


def test_ece_days_are_resampled_as_blocks(seed):
    # Day 0 right as often as it says, day 1 never right: a row bootstrap would
    # give a tight interval around 0.4; resampling the two days spans 0 to 0.8.
    rng = np.random.default_rng(seed)
    proba, y = overconfident(rng, 200, 0.8, 0.8)
    y[100:] = 1
    got = ece_interval(np.repeat([0, 1], 100), proba, y, n_resamples=400)
    assert got.low < 0.15 and got.high > 0.6


def test_ece_interval_needs_rows():
    with pytest.raises(ValueError, match="at least one row"):
        ece_interval([], np.zeros((0, 2)), [])
