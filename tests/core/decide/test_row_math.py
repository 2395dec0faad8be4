"""One-row arithmetic in plain Python gives numpy's bits (row_math, and the
calibration's one-task route built on it)."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core.decide import row_math
from panda_predictor.core.decide.calibration import (
    DEFAULT_METHOD,
    METHODS,
    _mixture,
    _rule_rows,
    calibrated_mixture,
    fit_calibrator,
)
from panda_predictor.core.decide.tail_rule import TailDecisionRule


def awkward_rows(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Return ``n`` probability-like rows of ``k`` values with the cases a
    shortcut gets wrong: ties for the top, zeros, whole zero rows, rows that do
    not sum to 1, values rounded as the predictor rounds them."""
    rows = rng.dirichlet(np.full(k, 0.7), n) * rng.uniform(0.5, 1.5, (n, 1))
    rows[::7, 1] = rows[::7, 0]  # a tie for the top
    rows[::11, -1] = 0.0
    rows[::97] = 0.0  # nothing at all: becomes uniform
    rows[::5] = rows[::5].round(5)
    return rows


@pytest.mark.parametrize("k", range(2, row_math.EXACT_SUM_BELOW))
def test_row_sum_and_normalised_are_numpys(k, seed):
    rows = awkward_rows(np.random.default_rng(seed + k), 20_000, k)
    sums = np.add.reduce(rows, axis=1)
    assert [row_math.row_sum(r) for r in rows.tolist()] == sums.tolist()
    total = sums[:, None]
    expected = np.where(total > 0, rows / np.where(total > 0, total, 1.0), 1.0 / k)
    assert [row_math.normalised(r) for r in rows.tolist()] == expected.tolist()


def test_a_longer_row_is_not_summed_in_plain_order_by_numpy(seed):
    """Why the one-row route stops at EXACT_SUM_BELOW classes: from there numpy
    sums pairwise, and plain order differs in the last bits on some rows."""
    rows = np.random.default_rng(seed).random((20_000, row_math.EXACT_SUM_BELOW))
    plain = [row_math.row_sum(r) for r in rows.tolist()]
    assert plain != np.add.reduce(rows, axis=1).tolist()


@pytest.mark.parametrize("k", [2, 3, 5])
def test_argmax_takes_the_first_of_equal_values(k, seed):
    rows = awkward_rows(np.random.default_rng(seed), 5_000, k)
    assert [row_math.argmax(r) for r in rows.tolist()] == rows.argmax(axis=1).tolist()
    assert row_math.argmax([0.2, 0.4, 0.4]) == 1


def test_interp_is_numpys_on_knots_between_and_outside(seed):
    rng = np.random.default_rng(seed)
    knots_x = np.unique(np.r_[0.1, rng.random(40).round(3), 0.9])
    knots_y = np.maximum.accumulate(rng.random(knots_x.size))
    xs = np.r_[knots_x, rng.random(5_000), -1.0, 0.0, 1.0, 2.0, np.nan]
    expected = np.interp(xs, knots_x, knots_y)
    got = [row_math.interp(x, knots_x.tolist(), knots_y.tolist()) for x in xs]
    np.testing.assert_array_equal(np.array(got), expected)
    # one knot, and a flat step
    assert row_math.interp(0.7, [0.5], [0.3]) == np.interp(0.7, [0.5], [0.3])
    assert row_math.interp(0.6, [0.5, 0.7], [0.2, 0.2]) == 0.2


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("k", [2, 4, 5])
def test_one_task_is_calibrated_with_the_batch_bits(method, k, seed):
    """The one-row route of calibrated_mixture gives exactly the row the array
    route gives in a batch, for every method, rows that follow the model or a
    rule, and accuracies outside [0, 1] (clipped)."""
    rng = np.random.default_rng(seed + k)
    truth = awkward_rows(rng, 3_000, k)
    labels = rng.integers(0, k, 3_000)
    fitted = fit_calibrator(truth, labels, method, rng.integers(0, 3, 3_000))
    n = 400
    proba = awkward_rows(rng, n, k)
    classes = rng.integers(0, k, n)
    followed = rng.integers(-1, 3, n)
    accuracy = rng.uniform(-0.2, 1.2, n)
    rule = _rule_rows(followed, n)
    batch = fitted._transform(_mixture(proba, classes, rule, accuracy), rule)
    for i in range(n):
        one = calibrated_mixture(
            fitted,
            proba[i : i + 1],
            classes[i : i + 1],
            followed[i : i + 1],
            accuracy[i : i + 1],
        )
        assert one.shape == (1, k)
        assert one[0].tolist() == batch[i].tolist(), (method, i)


def test_the_default_method_takes_the_one_row_route(seed):
    """The served calibrators have a one-row form (else one task would pay for
    the array route's numpy calls again)."""
    rng = np.random.default_rng(seed)
    fitted = fit_calibrator(
        rng.dirichlet(np.ones(4), 500), rng.integers(0, 4, 500), DEFAULT_METHOD
    )
    for rule in (False, True):
        assert fitted._transform_row([0.1, 0.2, 0.3, 0.4], rule) is not None


@pytest.mark.filterwarnings("ignore:Tail class")  # random labels: no recall to reach
@pytest.mark.parametrize("k", [2, 4, 5])
@pytest.mark.parametrize("tails", [1, 2])
def test_one_task_gets_the_batch_tail_class(k, tails, seed):
    """TailDecisionRule.predict of one row (plain floats) is the batch's class,
    thresholds met exactly included."""
    rng = np.random.default_rng(seed + 10 * k + tails)
    proba = awkward_rows(rng, 3_000, k)
    rule = TailDecisionRule(recall_target=0.9, n_tail_classes=min(tails, k - 1))
    rule.fit(proba, rng.integers(0, k, 3_000))
    rows = awkward_rows(rng, 2_000, k).astype(np.float32)
    # rows whose tail sum is exactly a threshold
    top = max(rule.thresholds_)
    rows[:20, top:] = 0.0
    rows[:20, top] = rule.thresholds_[top]
    batch = rule.predict(rows)
    one = [int(rule.predict(rows[i : i + 1])[0]) for i in range(len(rows))]
    assert one == batch.tolist()
    assert rule.predict(rows[:1]).dtype == batch.dtype
