"""Tail thresholds, confidence, the scouts-or-not policy and the coverage curve."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from panda_predictor.core.decide.tail_rule import (
    DEFAULT_FALLBACK_THRESHOLD,
    NotFittedError,
    TailDecisionRule,
    confidence,
    coverage_accuracy_curve,
    cumulative_from_top,
)


def tail_missed_by_argmax(rng: np.random.Generator, n: int = 600):
    """Return (proba, y) with 3 classes where argmax rarely predicts the tail class 2.

    Tail rows put ~0.3 on class 2 and more on class 0 or 1; other rows put less
    on class 2, so a threshold on P(class >= 2) can separate them but argmax cannot.
    """
    y = rng.choice(3, size=n, p=[0.6, 0.3, 0.1])
    top = np.where(y == 2, rng.uniform(0.25, 0.45, n), rng.uniform(0.0, 0.3, n))
    rest = 1.0 - top
    share0 = np.where(y == 1, rng.uniform(0.1, 0.4, n), rng.uniform(0.6, 0.9, n))
    proba = np.column_stack([rest * share0, rest * (1 - share0), top])
    return proba, y


def test_tail_rule_reaches_recall_target_where_argmax_misses(seed):
    rng = np.random.default_rng(seed)
    proba, y = tail_missed_by_argmax(rng)
    rule = TailDecisionRule(recall_target=0.95).fit(proba, y)

    report = rule.report_[2]
    assert report["recall_argmax"] < 0.5
    assert report["recall_rule"] >= 0.95
    assert report["precision_paid"] == pytest.approx(
        report["precision_argmax"] - report["precision_rule"]
    )
    assert set(report) >= {"threshold", "support", "precision_rule", "fallback"}
    assert report["support"] == int(np.sum(y == 2))
    pred = rule.predict(proba)
    assert np.mean(pred[y == 2] == 2) == pytest.approx(report["recall_rule"])


def test_tail_threshold_is_the_largest_reaching_the_target(seed):
    rng = np.random.default_rng(seed)
    proba, y = tail_missed_by_argmax(rng)
    rule = TailDecisionRule(recall_target=0.9).fit(proba, y)
    t = rule.thresholds_[2]
    scores = cumulative_from_top(proba)[:, 2][y == 2]
    assert np.mean(scores >= t) >= 0.9
    assert np.mean(scores >= np.nextafter(t, 1.0)) < 0.9


def test_tail_rule_fit_takes_only_validation_data(seed):
    assert list(inspect.signature(TailDecisionRule.fit).parameters) == [
        "self",
        "proba_val",
        "y_val",
    ]
    rng = np.random.default_rng(seed)
    val_proba, val_y = tail_missed_by_argmax(rng)
    test_proba, _ = tail_missed_by_argmax(rng)
    rule = TailDecisionRule().fit(val_proba, val_y)
    before = rule.to_dict()
    rule.predict(test_proba)
    assert rule.to_dict() == before


def test_tail_rule_falls_back_and_warns_without_tail_samples():
    proba = np.array([[0.7, 0.2, 0.1], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1]])
    with pytest.warns(UserWarning, match="no sample in the validation data"):
        rule = TailDecisionRule().fit(proba, [0, 1, 0])
    assert rule.thresholds_ == {2: DEFAULT_FALLBACK_THRESHOLD}
    assert rule.report_[2]["fallback"] is True
    assert rule.predict([[0.5, 0.25, 0.25]]).tolist() == [2]


def test_tail_rule_warns_when_larger_classes_take_the_samples():
    # Class-1 rows look like class 2, so the class-2 threshold steals them.
    proba = np.array(
        [[0.1, 0.1, 0.8], [0.1, 0.1, 0.8], [0.8, 0.1, 0.1], [0.1, 0.2, 0.7]]
    )
    with pytest.warns(UserWarning, match="cannot reach recall"):
        rule = TailDecisionRule(n_tail_classes=2).fit(proba, [1, 1, 0, 2])
    assert rule.report_[1]["recall_rule"] == 0.0


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ([0.50, 0.20, 0.20, 0.10], 3),  # P(>=3) = 0.10 >= 0.10
        ([0.60, 0.15, 0.20, 0.05], 2),  # P(>=3) too low, P(>=2) = 0.25 >= 0.25
        ([0.30, 0.50, 0.15, 0.05], 1),  # no tail, argmax of the lower classes
        ([0.80, 0.10, 0.06, 0.04], 0),
    ],
    ids=["top-tail", "second-tail", "lower-argmax-1", "lower-argmax-0"],
)
def test_predict_walks_the_tails_from_the_top(row, expected):
    rule = TailDecisionRule.from_dict(
        {
            "recall_target": 0.95,
            "n_tail_classes": 2,
            "n_classes_": 4,
            "thresholds_": {"3": 0.10, "2": 0.25},
        }
    )
    assert rule.predict([row]).tolist() == [expected]


def test_to_dict_round_trips_through_json(seed):
    rng = np.random.default_rng(seed)
    proba, y = tail_missed_by_argmax(rng)
    rule = TailDecisionRule(recall_target=0.9).fit(proba, y)
    again = TailDecisionRule.from_dict(json.loads(json.dumps(rule.to_dict())))
    assert again.thresholds_ == rule.thresholds_
    assert again.report_ == rule.report_
    np.testing.assert_array_equal(again.predict(proba), rule.predict(proba))


@pytest.mark.parametrize(
    ("kwargs", "proba", "y", "match"),
    [
        ({}, [[0.5, 0.5]], [0, 1], "1-D array of 1 class labels"),
        ({}, [0.5, 0.5], [0], "2-D array"),
        ({}, [[1.5, -0.5]], [0], "non-negative"),
        ({}, [[0.5, 0.5]], [2], r"integer classes in 0\.\.1"),
        ({"recall_target": 0.0}, [[0.5, 0.5]], [1], "'recall_target' field"),
        ({"n_tail_classes": 2}, [[0.5, 0.5]], [1], "'n_tail_classes' field"),
        ({"fallback_threshold": 2}, [[0.5, 0.5]], [1], "'fallback_threshold' field"),
        ({}, np.zeros((0, 2)), [], "at least one sample"),
    ],
    ids=[
        "y-length",
        "proba-1d",
        "proba-negative",
        "y-out-of-range",
        "recall-zero",
        "too-many-tails",
        "fallback-above-1",
        "empty",
    ],
)
def test_tail_rule_fit_errors(kwargs, proba, y, match):
    with pytest.raises(ValueError, match=match):
        TailDecisionRule(**kwargs).fit(proba, y)


def test_unfitted_rule_and_wrong_width_raise():
    with pytest.raises(NotFittedError, match="not fitted"):
        TailDecisionRule().predict([[0.5, 0.5]])
    rule = TailDecisionRule().fit([[0.4, 0.6], [0.7, 0.3]], [1, 0])
    with pytest.raises(ValueError, match="must have 2 columns"):
        rule.predict([[0.2, 0.3, 0.5]])


def test_one_not_fitted_error_for_every_estimator():
    """A caller catches one type whether a rule or a model was used too early."""
    from panda_predictor.core import errors
    from panda_predictor.core.features import pipeline as feature_pipeline
    from panda_predictor.models import NotFittedError as ModelsNotFittedError
    from panda_predictor.models.base import NotFittedError as BaseNotFittedError

    assert NotFittedError is errors.NotFittedError
    assert ModelsNotFittedError is BaseNotFittedError is errors.NotFittedError
    assert feature_pipeline.NotFittedError is errors.NotFittedError
    assert feature_pipeline.check_frame is errors.check_frame
    assert issubclass(errors.NotFittedError, ValueError)
    assert issubclass(errors.NotFittedError, AttributeError)


@pytest.mark.parametrize(
    ("row", "chosen", "expected"),
    [
        ([0.1, 0.2, 0.3, 0.4], 0, 0.1),
        ([0.1, 0.2, 0.3, 0.4], 1, 0.3),
        ([0.1, 0.2, 0.3, 0.4], 2, 0.6),
        ([0.1, 0.2, 0.3, 0.4], 3, 1.0),
    ],
    ids=["class-0", "class-1", "class-2", "top-class-is-always-enough"],
)
def test_confidence_is_cumulative_probability_up_to_the_choice(row, chosen, expected):
    assert confidence([row], [chosen]) == pytest.approx([expected])


def test_predict_with_confidence_matches_confidence(seed):
    rng = np.random.default_rng(seed)
    proba, y = tail_missed_by_argmax(rng)
    rule = TailDecisionRule().fit(proba, y)
    pred, conf = rule.predict_with_confidence(proba)
    np.testing.assert_allclose(conf, np.cumsum(proba, axis=1)[np.arange(len(y)), pred])


def test_coverage_accuracy_curve_by_hand():
    conf = [0.9, 0.8, 0.5, 0.3]
    correct = [True, False, True, False]
    curve = coverage_accuracy_curve(conf, correct, [0.0, 0.5, 0.85, 0.95])
    np.testing.assert_allclose(curve.coverage, [1.0, 0.75, 0.25, 0.0])
    np.testing.assert_allclose(curve.accuracy[:3], [0.5, 2 / 3, 1.0])
    assert np.isnan(curve.accuracy[3])
    assert curve.to_dict()["accuracy"][3] is None
    assert curve.n_decided.tolist() == [4, 3, 1, 0]


def test_coverage_curve_rejects_mismatched_input():
    with pytest.raises(ValueError, match="equal length"):
        coverage_accuracy_curve([0.5, 0.6], [True])


def test_precision_floor_stops_the_rule_flooding_the_tail():
    """A model that cannot see the tail must not send everything to the top class."""
    rng = np.random.default_rng(3)
    n = 2000
    y = (rng.random(n) < 0.03).astype(int) + 1  # classes 1 and 2 (rare)
    proba = np.column_stack(
        [np.full(n, 0.1), np.full(n, 0.6), np.full(n, 0.3)]
    ) + rng.normal(0, 0.02, (n, 3))
    proba = np.clip(proba, 1e-3, None)
    proba /= proba.sum(axis=1, keepdims=True)
    unguarded = TailDecisionRule(recall_target=0.95).fit(proba, y)
    assert np.mean(unguarded.predict(proba) == 2) > 0.8
    guarded = TailDecisionRule(recall_target=0.95, min_precision=0.3).fit(proba, y)
    report = guarded.report_[2]
    assert report["limited_by_precision"] is True
    assert report["precision_rule"] >= 0.3 or report["recall_rule"] == 0.0
    assert np.mean(guarded.predict(proba) == 2) < 0.1
    again = TailDecisionRule.from_dict(guarded.to_dict())
    np.testing.assert_array_equal(again.predict(proba), guarded.predict(proba))
