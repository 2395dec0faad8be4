"""Calibration: the calibrators, the ECE, the served mixture, the bundle round-trip."""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pytest

from panda_predictor.core.assess.calibration_error import (
    cumulative_calibration_error,
    expected_calibration_error,
)
from panda_predictor.core.decide.calibration import (
    DEFAULT_METHOD,
    METHODS,
    IdentityCalibrator,
    TemperatureCalibrator,
    calibrated_mixture,
    calibrator_from_dict,
    fit_calibrator,
    make_calibrator,
    served_mixture,
)
from panda_predictor.core.decide.tail_rule import confidence
from panda_predictor.core.errors import NotFittedError
from panda_predictor.serving.bundle import load_bundle, save_bundle
from panda_predictor.serving.combination import ServingHistory
from panda_predictor.serving.predictor import Predictor

LATER = datetime(2100, 1, 1)


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def sample(proba: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Return one class per row drawn from its probabilities."""
    return (proba.cumsum(axis=1) < rng.random(len(proba))[:, None]).sum(axis=1)


@pytest.fixture
def calibrated(seed):
    """Return true probabilities (n=20000, K=4) and classes drawn from them."""
    rng = np.random.default_rng(seed)
    truth = softmax(rng.normal(0.0, 1.5, (20_000, 4)))
    return truth, sample(truth, rng)


def test_temperature_recovers_a_known_temperature(calibrated):
    truth, y = calibrated
    overconfident = softmax(np.log(truth) * 2.5)  # the model's, at T = 1/2.5
    fitted = TemperatureCalibrator().fit(overconfident, y)
    assert fitted.temperature_ == pytest.approx(2.5, rel=0.05)
    np.testing.assert_allclose(fitted.transform(overconfident), truth, atol=0.03)


def test_ece_is_small_when_calibrated_and_large_when_overconfident(calibrated):
    truth, y = calibrated
    overconfident = softmax(np.log(truth) * 3.0)
    assert expected_calibration_error(truth, y) < 0.02
    assert cumulative_calibration_error(truth, y) < 0.02
    assert expected_calibration_error(overconfident, y) > 0.10
    assert cumulative_calibration_error(overconfident, y) > 0.05


@pytest.mark.parametrize("method", METHODS)
def test_every_method_lowers_an_overconfident_ece(calibrated, method):
    truth, y = calibrated
    overconfident = softmax(np.log(truth) * 3.0)
    out = fit_calibrator(overconfident[:10_000], y[:10_000], method).transform(
        overconfident[10_000:]
    )
    np.testing.assert_allclose(out.sum(axis=1), 1.0)
    assert (out >= 0).all()
    ece = expected_calibration_error(out, y[10_000:])
    if method == "none":
        assert ece > 0.10
    else:  # top-label isotonic may move the top class: a coarser fit
        assert ece < (0.06 if method.startswith("top") else 0.03)


def test_temperature_keeps_each_rows_class_order(calibrated):
    truth, y = calibrated
    out = TemperatureCalibrator().fit(truth**2, y).transform(truth**2)
    np.testing.assert_array_equal(np.argsort(out, axis=1), np.argsort(truth, axis=1))


@pytest.mark.parametrize("method", METHODS)
def test_to_dict_from_dict_round_trip(calibrated, method):
    truth, y = calibrated
    fitted = make_calibrator(method).fit(truth[:3000] ** 2, y[:3000])
    again = calibrator_from_dict(json.loads(json.dumps(fitted.to_dict())))
    assert type(again) is type(fitted)
    np.testing.assert_allclose(again.transform(truth), fitted.transform(truth))


@pytest.mark.parametrize("method", METHODS)
def test_each_row_is_mapped_alone(calibrated, method):
    """A batch maps each row as that row alone (one task pays for its own map),
    and a row that follows a rule takes the rule rows' map."""
    truth, y = calibrated
    rng = np.random.default_rng(7)
    followed = rng.integers(0, 3, len(y))
    fitted = fit_calibrator(truth[:4000] ** 2, y[:4000], method, followed[:4000])
    proba, rules = truth[4000:4400] ** 2, followed[4000:4400]
    batch = fitted.transform(proba, rules)
    for i in range(0, len(proba), 7):
        np.testing.assert_array_equal(
            fitted.transform(proba[i : i + 1], rules[i : i + 1])[0], batch[i]
        )
    parts = getattr(fitted, "parts_", None)
    if parts is not None:
        rule = rules > 0
        np.testing.assert_array_equal(batch[rule], parts["rule"].transform(proba[rule]))
        np.testing.assert_array_equal(
            batch[~rule], parts["model"].transform(proba[~rule])
        )


@pytest.mark.parametrize("method", ["isotonic", "top_isotonic"])
def test_new_knots_are_used_at_once(calibrated, method):
    """The knots' arrays are converted once, and again when the knots change."""
    truth, y = calibrated
    fitted = make_calibrator(method).fit(truth[:3000] ** 2, y[:3000])
    before = fitted.transform(truth[:50])
    other = make_calibrator(method).fit(truth[3000:3200], y[3000:3200])
    for learned in ("knots_x_", "knots_y_", "rest_weights_"):
        if hasattr(other, learned):
            setattr(fitted, learned, getattr(other, learned))
    np.testing.assert_array_equal(
        fitted.transform(truth[:50]), other.transform(truth[:50])
    )
    assert not np.array_equal(fitted.transform(truth[:50]), before)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"method": "platt", "n_classes_": 3}, "method among"),
        ({"method": "temperature"}, "n_classes_"),
    ],
    ids=["unknown-method", "no-classes"],
)
def test_a_bad_stored_calibrator_is_refused(data, match):
    with pytest.raises(ValueError, match=match):
        calibrator_from_dict(data)


def test_errors_say_what_was_expected():
    with pytest.raises(ValueError, match="calibration method must be one of"):
        make_calibrator("platt")
    with pytest.raises(NotFittedError, match="not fitted"):
        TemperatureCalibrator().transform(np.full((1, 3), 1 / 3))
    with pytest.raises(ValueError, match="3 columns"):
        IdentityCalibrator(3).transform(np.full((1, 4), 0.25))


def test_unknown_labels_are_left_out_of_the_fit(calibrated):
    truth, y = calibrated
    labels = y.copy()
    labels[::2] = -1
    a = fit_calibrator(truth**2, labels, "temperature")
    b = fit_calibrator(truth[1::2] ** 2, y[1::2], "temperature")
    assert a.temperature_ == pytest.approx(b.temperature_)


def test_served_mixture_mixes_a_followed_rule_with_the_model():
    proba = np.array([[0.7, 0.2, 0.1], [0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    classes = np.array([0, 2, 1])
    followed = np.array([0, 3, -1])  # the model, a rule, no combination
    accuracy = np.array([0.9, 0.6, 0.5])
    out = served_mixture(proba, classes, followed, accuracy)
    np.testing.assert_allclose(out[0], proba[0])
    np.testing.assert_allclose(out[1], 0.6 * np.eye(3)[2] + 0.4 * proba[1])
    np.testing.assert_allclose(out[2], proba[2])
    np.testing.assert_allclose(served_mixture(proba, classes), proba)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "combined", ["rules", "model-only", "none"], ids=["rules", "model", "none"]
)
def test_calibrated_mixture_is_the_mixture_calibrated(calibrated, method, combined):
    """The one served distribution: the mixture, then its calibrator, exactly."""
    truth, y = calibrated
    rng = np.random.default_rng(3)
    n = 300
    followed = {
        "rules": rng.integers(-1, 4, n),
        "model-only": np.zeros(n, dtype=int),
        "none": None,
    }[combined]
    fitted = fit_calibrator(
        truth[:3000] ** 2, y[:3000], method, rng.integers(0, 3, 3000)
    )
    proba, classes = truth[3000 : 3000 + n], rng.integers(0, 4, n)
    accuracy = rng.random(n)
    expected = fitted.transform(
        served_mixture(proba, classes, followed, accuracy), followed
    )
    got = calibrated_mixture(fitted, proba, classes, followed, accuracy)
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(ValueError, match="must have 4 columns"):
        calibrated_mixture(fitted, proba[:, :3], classes, followed, accuracy)
    with pytest.raises(NotFittedError, match="not fitted"):
        calibrated_mixture(
            make_calibrator(method if method != "none" else "temperature"),
            proba,
            classes,
        )


@pytest.fixture(scope="module")
def bundle_dir(trained_bundle_dir):
    return trained_bundle_dir


def test_training_fits_one_calibrator_per_target_and_the_bundle_keeps_it(
    bundle_dir, tmp_path
):
    bundle = load_bundle(bundle_dir)
    assert set(bundle.calibrators) == set(bundle.models)
    assert {c.method for c in bundle.calibrators.values()} == {DEFAULT_METHOD}
    for target in bundle.models:
        assert 0.0 <= bundle.metrics[f"{target}.ece"] <= 1.0
        assert f"{target}.ece_uncalibrated" in bundle.metrics
    calibrator = TemperatureCalibrator()
    calibrator.n_classes_, calibrator.temperature_ = (
        bundle.bins["ramcount"].n_classes,
        1.7,
    )
    bundle.calibrators["ramcount"] = calibrator
    again = load_bundle(save_bundle(bundle, tmp_path / "again"))
    assert again.calibrators["ramcount"].to_dict() == (
        bundle.calibrators["ramcount"].to_dict()
    )


def test_an_old_bundle_without_calibrators_loads_as_identity(bundle_dir, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(bundle_dir, old)
    decisions = json.loads((old / "decisions.json").read_text())
    del decisions["calibrators"]
    (old / "decisions.json").write_text(json.dumps(decisions))
    bundle = load_bundle(old)
    assert bundle.calibrators == {}
    rng = np.random.default_rng(0)
    proba = softmax(rng.normal(size=(5, bundle.bins["ramcount"].n_classes)))
    np.testing.assert_allclose(bundle.calibrator("ramcount").transform(proba), proba)


def test_records_and_frame_routes_give_the_same_distribution(
    bundle_dir, labelled_history
):
    bundle = load_bundle(bundle_dir)
    predictor = Predictor(bundle, "p", "1")
    history = labelled_history.history
    tasks = labelled_history.tasks.tail(40).assign(creationdate=LATER)
    served = ServingHistory(history, LATER)
    by_frame = predictor.classified(tasks, served)
    by_records = predictor.classified_records(tasks.to_dict("records"), served)
    assert by_records is not None
    for target in bundle.models:
        np.testing.assert_array_equal(
            by_records.chosen[target], by_frame.chosen[target]
        )
        np.testing.assert_allclose(
            by_records.distribution[target], by_frame.distribution[target], rtol=1e-6
        )
        np.testing.assert_allclose(
            by_frame.confidence[target],
            confidence(by_frame.distribution[target], by_frame.chosen[target]),
        )
    rules = np.concatenate([by_frame.followed[t] for t in bundle.models]) > 0
    assert rules.any(), "some task follows a rule: the mixture is exercised"
    raw = served_mixture(
        by_frame.proba["ramcount"],
        by_frame.chosen["ramcount"],
        by_frame.followed["ramcount"],
        by_frame.record_accuracy["ramcount"],
    )
    assert not np.allclose(raw, by_frame.distribution["ramcount"]), "calibrated"
    predictions = predictor.predict_records(tasks.to_dict("records"), served)
    # What a prediction states is the calibrated probability that its written
    # value (the cost choice on this distribution) is enough.
    decided = predictor.decide(by_frame, predictor.in_domain(tasks))
    for p in predictions:
        row = int(np.flatnonzero(tasks["jeditaskid"].to_numpy() == p.jeditaskid)[0])
        for target, tp in p.targets.items():
            assert tp.confidence == pytest.approx(decided[f"{target}_confidence"][row])


def inflated_tail(n: int = 4000, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Return probabilities whose top class is right as often as stated, but whose
    class 2 gets 0.3 of every row while it is the truth of 2 % of the rows (as
    class-weighted training inflates a rare class)."""
    rng = np.random.default_rng(seed)
    top = rng.integers(0, 2, n)
    proba = np.zeros((n, 3))
    proba[np.arange(n), top] = 0.6
    proba[np.arange(n), 1 - top] = 0.1
    proba[:, 2] = 0.3
    draw = rng.random(n)
    y = np.where(draw < 0.6, top, np.where(draw < 0.98, 1 - top, 2))
    return proba, y


def test_the_rest_is_shared_as_often_as_each_class_was_right():
    proba, y = inflated_tail()
    fitted = make_calibrator("top_isotonic").fit(proba, y)
    out = fitted.transform(proba)
    # The top keeps its (already calibrated) 0.6; the rest, 0.4, goes 0.38 : 0.02
    # to the other two classes, as they were the truth off the top.
    assert out[:, :2].max(axis=1) == pytest.approx(0.6, abs=0.03)
    assert out[:, 2].mean() == pytest.approx((y == 2).mean(), abs=0.01)
    assert out[:, 2].mean() < proba[:, 2].mean() / 5
    np.testing.assert_allclose(out.sum(axis=1), 1.0)


def test_a_calibrator_stored_before_the_rest_weights_shares_in_proportion():
    proba, y = inflated_tail()
    stored = make_calibrator("top_isotonic").fit(proba, y).to_dict()
    assert len(stored["rest_weights_"]) == 3
    del stored["rest_weights_"]
    old = calibrator_from_dict(stored)
    out = old.transform(proba[:5])
    top = out[:, :2].max(axis=1)
    # Without weights the rest keeps the model's own 0.1 : 0.3 proportion.
    np.testing.assert_allclose(out[:, 2], (1 - top) * 0.75)
