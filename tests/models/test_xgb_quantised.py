"""XGBoost on rows quantised once: the same trees as ``fit``, unknown labels ignored."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.models import XGBoostResourceClassifier
from panda_predictor.models.latency import make_synthetic_tasks
from panda_predictor.models.xgb import QuantisedParts


@pytest.fixture
def tasks():
    """Return train/validation/test tasks whose numbers have few distinct values.

    With fewer distinct values than bins, the bin edges are the values themselves
    whichever rows they are computed from, so both routes see identical histograms.
    """
    X, y = make_synthetic_tasks(3000, 7)
    X = X.assign(log_nevents=X["log_nevents"].round(1))
    return (X.iloc[:2000], y[:2000]), (X.iloc[2000:2500], y[2000:2500]), X.iloc[2500:]


def _model(**kw):
    return XGBoostResourceClassifier(4, n_estimators=40, max_depth=4, **kw)


def _hide(y, every):
    """Return y with every ``every``-th label unknown (-1)."""
    hidden = y.copy()
    hidden[::every] = -1
    return hidden


def test_quantised_fit_equals_fit_on_the_labelled_rows(tasks):
    (X, y), (X_val, y_val), X_test = tasks
    y_part, y_val_part = _hide(y, 3), _hide(y_val, 4)
    decay = np.linspace(0.2, 1.0, len(y))
    known, val_known = y_part >= 0, y_val_part >= 0

    plain = _model().fit(
        X[known],
        y_part[known],
        X_val=X_val[val_known],
        y_val=y_val_part[val_known],
        sample_weight=decay[known],
    )
    quantised = _model().fit_quantised(
        QuantisedParts(X, X_val), y_part, y_val_part, sample_weight=decay
    )

    assert quantised.n_estimators_ == plain.n_estimators_
    np.testing.assert_allclose(
        quantised.predict_proba(X_test), plain.predict_proba(X_test), atol=1e-5
    )
    assert list(quantised.feature_names_in_) == list(plain.feature_names_in_)
    assert quantised.categories_ == plain.categories_


def test_one_quantisation_serves_several_targets(tasks):
    (X, y), (X_val, y_val), X_test = tasks
    parts = QuantisedParts(X, X_val)
    first = _model().fit_quantised(parts, y, y_val)
    second = _model().fit_quantised(parts, 3 - y, 3 - y_val)  # another "target"

    again = _model().fit_quantised(QuantisedParts(X, X_val), y, y_val)

    agree = np.mean(first.predict(X_test) == 3 - second.predict(X_test))
    assert agree > 0.9
    np.testing.assert_array_equal(first.predict(X_test), again.predict(X_test))


def test_a_sample_is_binned_like_its_training_part():
    X, y = make_synthetic_tasks(3000, 7)  # thousands of distinct numbers
    X_val, y_val = X.iloc[2000:2500], y[2000:2500]
    full = QuantisedParts(X.iloc[:2000], X_val)
    sample = QuantisedParts(X.iloc[:2000:2], X_val, ref=full)
    alone = QuantisedParts(X.iloc[:2000:2], X_val)

    model = _model().fit_quantised(sample, y[:2000:2], y_val)

    full_cuts = full.train.get_quantile_cut()
    for got, want in zip(sample.train.get_quantile_cut(), full_cuts, strict=True):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(alone.train.get_quantile_cut()[1], full_cuts[1])
    assert sample.train.num_row() == 1000
    assert model.predict_proba(X.iloc[2500:]).shape == (500, 4)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda y, yv: (y[:-1], yv), "one label per row of 'X_train' \\(2000\\)"),
        (lambda y, yv: (np.r_[0.5, y[1:]], yv), "integer class indices. Got 0.5"),
        (lambda y, yv: (y, yv + 5), "'y_val' argument must contain .* in -1..3"),
        (lambda y, yv: (np.where(y > 0, -1, 0), yv), "at least two classes"),
    ],
)
def test_bad_labels_get_clear_errors(tasks, change, message):
    (X, y), (X_val, y_val), _ = tasks
    y, y_val = change(y, y_val)
    with pytest.raises(ValueError, match=message):
        _model().fit_quantised(QuantisedParts(X, X_val), y, y_val)


def test_bins_must_match_the_model(tasks):
    (X, y), (X_val, y_val), _ = tasks
    with pytest.raises(
        ValueError, match="quantised with max_bin=256 .* Got max_bin=64"
    ):
        _model().fit_quantised(QuantisedParts(X, X_val, max_bin=64), y, y_val)


def test_validation_columns_must_match(tasks):
    (X, _), (X_val, _), _ = tasks
    with pytest.raises(ValueError, match="'X_val' argument must have the columns"):
        QuantisedParts(X, X_val[list(X_val.columns[::-1])])
