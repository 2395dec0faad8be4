"""Per-target and joint metrics against hand-computed figures and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix as sk_confusion
from sklearn.metrics import f1_score, precision_recall_fscore_support

from panda_predictor.core.assess.evaluation import (
    all_correct,
    all_sufficient,
    confusion_matrix,
    evaluate_target,
    evaluate_targets,
)

CASES = [
    pytest.param(
        [0, 0, 1, 1, 2, 2],
        [0, 1, 1, 1, 2, 0],
        3,
        [[1, 1, 0], [0, 2, 0], [1, 0, 1]],
        {
            "accuracy": 4 / 6,
            "under": 1 / 6,
            "over": 1 / 6,
            "precision": [0.5, 2 / 3, 1.0],
            "recall": [0.5, 1.0, 0.5],
        },
        id="three-classes",
    ),
    pytest.param(
        [0, 1, 1, 0],
        [0, 2, 1, 1],
        3,
        [[1, 1, 0], [0, 1, 1], [0, 0, 0]],
        # class 2 is never true: recall 0/0 -> 0, precision 0/1 = 0
        {
            "accuracy": 0.5,
            "under": 0.0,
            "over": 0.5,
            "precision": [1.0, 0.5, 0.0],
            "recall": [0.5, 0.5, 0.0],
        },
        id="class-absent-from-truth",
    ),
    pytest.param(
        [3, 3, 2, 1],
        [0, 3, 2, 1],
        4,
        [[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1]],
        # class 0 is never true but predicted once: precision 0, recall 0/0 -> 0
        {
            "accuracy": 0.75,
            "under": 0.25,
            "over": 0.0,
            "precision": [0.0, 1.0, 1.0, 1.0],
            "recall": [0.0, 1.0, 1.0, 0.5],
        },
        id="under-allocation-of-the-tail",
    ),
    pytest.param(
        [1, 1, 1],
        [1, 1, 1],
        4,
        [[0] * 4, [0, 3, 0, 0], [0] * 4, [0] * 4],
        {
            "accuracy": 1.0,
            "under": 0.0,
            "over": 0.0,
            "precision": [0.0, 1.0, 0.0, 0.0],
            "recall": [0.0, 1.0, 0.0, 0.0],
        },
        id="unused-classes",
    ),
]


@pytest.mark.parametrize(("y_true", "y_pred", "k", "cm", "expected"), CASES)
def test_target_metrics_by_hand(y_true, y_pred, k, cm, expected):
    ev = evaluate_target(y_true, y_pred, n_classes=k, target="ramcount")
    np.testing.assert_array_equal(ev.confusion, cm)
    assert ev.accuracy == pytest.approx(expected["accuracy"])
    assert ev.under_allocation_rate == pytest.approx(expected["under"])
    assert ev.over_allocation_rate == pytest.approx(expected["over"])
    np.testing.assert_allclose(ev.precision, expected["precision"])
    np.testing.assert_allclose(ev.recall, expected["recall"])
    np.testing.assert_array_equal(ev.support, np.asarray(cm).sum(axis=1))


@pytest.mark.parametrize(("y_true", "y_pred", "k", "cm", "expected"), CASES)
def test_target_metrics_match_sklearn(y_true, y_pred, k, cm, expected):
    ev = evaluate_target(y_true, y_pred, n_classes=k)
    labels = list(range(k))
    np.testing.assert_array_equal(
        ev.confusion, sk_confusion(y_true, y_pred, labels=labels)
    )
    p, r, f, s = precision_recall_fscore_support(
        y_true, y_pred, labels=labels, zero_division=0
    )
    np.testing.assert_allclose(ev.precision, p)
    np.testing.assert_allclose(ev.recall, r)
    np.testing.assert_allclose(ev.f1, f)
    np.testing.assert_array_equal(ev.support, s)
    # Without labels, scikit-learn averages over classes seen in truth or prediction.
    assert ev.macro_f1 == pytest.approx(
        f1_score(y_true, y_pred, average="macro", zero_division=0)
    )


def test_random_predictions_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 5, 300)
    y_pred = np.clip(y_true + rng.integers(-1, 2, 300), 0, 4)
    ev = evaluate_target(y_true, y_pred, n_classes=5)
    assert ev.macro_f1 == pytest.approx(f1_score(y_true, y_pred, average="macro"))
    assert ev.under_allocation_rate + ev.over_allocation_rate == pytest.approx(
        1 - ev.accuracy
    )


def test_target_to_dict_is_flat_and_named():
    ev = evaluate_target([0, 1, 2], [0, 1, 1], n_classes=3, target="cputime")
    flat = ev.to_dict()
    assert flat["cputime.accuracy"] == pytest.approx(2 / 3)
    assert flat["cputime.under_allocation_rate"] == pytest.approx(1 / 3)
    assert flat["cputime.class_2.recall"] == 0.0
    assert all(isinstance(v, float) for v in flat.values())
    assert ev.to_json()["confusion"] == [[1, 0, 0], [0, 1, 0], [0, 1, 0]]


def test_joint_metrics_by_hand():
    y_true = {
        t: np.zeros(4, int) for t in ("ramcount", "cputime", "iointensity", "walltime")
    }
    # Task 0: all right; task 1: 3 right; task 2: 1 right; task 3: none right.
    y_pred = {
        "ramcount": np.array([0, 0, 0, 1]),
        "cputime": np.array([0, 0, 1, 1]),
        "iointensity": np.array([0, 0, 1, 1]),
        "walltime": np.array([0, 1, 1, 1]),
    }
    ev = evaluate_targets(y_true, y_pred, n_classes={t: 2 for t in y_true})
    assert ev.exact_match_rate == 0.25
    assert ev.at_least_right == {1: 0.75, 2: 0.5, 3: 0.5}
    assert ev.mean_accuracy == pytest.approx(np.mean([0.75, 0.5, 0.5, 0.25]))
    assert all_correct(y_true, y_pred).tolist() == [True, False, False, False]
    assert all_sufficient(y_true, y_pred).all()
    assert all_sufficient(y_pred, y_true).tolist() == [True, False, False, False]
    flat = ev.to_dict()
    assert flat["joint.exact_match_rate"] == 0.25
    assert flat["joint.at_least_2_right"] == 0.5
    assert flat["walltime.accuracy"] == 0.25
    assert "joint.at_least_4_right" not in flat


@pytest.mark.parametrize(
    ("y_true", "y_pred", "kwargs", "match"),
    [
        ([], [], {}, "non-empty and of equal length"),
        ([0, 1], [0], {}, "non-empty and of equal length"),
        ([[0, 1]], [[0, 1]], {}, "1-D array"),
        ([0, -1], [0, 1], {}, "non-negative integer classes"),
        ([0.5, 1], [0, 1], {}, "non-negative integer classes"),
        ([0, 3], [0, 1], {"n_classes": 3}, "'n_classes' field"),
        ([0, 1], [0, 1], {"class_names": ["a"]}, "'class_names' field"),
    ],
    ids=[
        "empty",
        "length",
        "2d",
        "negative",
        "fractional",
        "too-few-classes",
        "names-length",
    ],
)
def test_evaluate_target_errors(y_true, y_pred, kwargs, match):
    with pytest.raises(ValueError, match=match):
        evaluate_target(y_true, y_pred, **kwargs)


@pytest.mark.parametrize(
    ("y_true", "y_pred", "match"),
    [
        ({"a": [0]}, {"b": [0]}, "same, non-empty set of targets"),
        ({}, {}, "same, non-empty set of targets"),
        ({"a": [0], "b": [0, 1]}, {"a": [0], "b": [0, 1]}, "one label per task"),
    ],
    ids=["target-mismatch", "no-targets", "row-mismatch"],
)
def test_evaluate_targets_errors(y_true, y_pred, match):
    with pytest.raises(ValueError, match=match):
        evaluate_targets(y_true, y_pred)


def test_confusion_matrix_infers_size():
    assert confusion_matrix([0, 2], [1, 2]).shape == (3, 3)
