"""Keras classifier: architecture, scaling, learning, predictions equal Keras' call."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.models.keras_net import KerasResourceClassifier, embedding_dim
from panda_predictor.models.latency import make_synthetic_tasks

pytestmark = pytest.mark.slow

#: Seed of the module-wide fitted model (module fixtures cannot use ``seed``).
MODULE_SEED = 23


@pytest.fixture(scope="module")
def trained():
    """Return (model, train split, held-out split) for a model fitted once."""
    X, y = make_synthetic_tasks(4000, MODULE_SEED)
    train, test = (X.iloc[:3000], y[:3000]), (X.iloc[3000:], y[3000:])
    model = KerasResourceClassifier(4, epochs=20, batch_size=256, random_state=1)
    return model.fit(*train), train, test


@pytest.mark.parametrize(
    ("cardinality", "dim"),
    [(1, 1), (2, 2), (6, 3), (8, 4), (1000, 10), (2**31, 32), (2**40, 32)],
    ids=lambda v: str(v),
)
def test_embedding_dim(cardinality, dim):
    assert embedding_dim(cardinality) == dim


def test_architecture(trained):
    model, (X, _), _ = trained
    layers = {type(layer).__name__: [] for layer in model.model_.layers}
    for layer in model.model_.layers:
        layers[type(layer).__name__].append(layer)
    dims = [layer.output_dim for layer in layers["Embedding"]]
    # processingtype: 6 categories -> 3; framework: 4 -> 3.
    assert dims == [3, 3]
    assert [d.units for d in layers["Dense"]] == [256, 128, 64, 4]
    assert layers["Dense"][-1].activation.__name__ == "softmax"
    assert [d.rate for d in layers["Dropout"]] == [0.4, 0.3, 0.3]
    assert len(layers["BatchNormalization"]) == 3
    assert all(d.kernel_regularizer is not None for d in layers["Dense"])
    # Two numeric columns plus one missing indicator (only log_nevents has gaps).
    assert model.indicator_features_ == ["log_nevents"]
    assert model.model_.get_layer("numeric").output.shape[-1] == 3


def test_scaling_learned_in_fit(trained):
    model, (X, _), _ = trained
    fit_part = X.iloc[: len(X) - int(len(X) * model.validation_fraction)]
    np.testing.assert_allclose(
        model.means_,
        fit_part[["log_nevents", "corecount"]].mean().to_numpy(),
        rtol=1e-4,
    )
    numeric = model._inputs(model._align(X.iloc[:200]))[0]
    assert not np.isnan(numeric).any()
    np.testing.assert_array_equal(numeric[:, 2], X["log_nevents"].iloc[:200].isna())


def test_beats_majority_class(trained):
    model, (_, y), (X_test, y_test) = trained
    majority = np.mean(y_test == np.bincount(y).argmax())
    accuracy = np.mean(model.predict(X_test) == y_test)
    assert accuracy > majority + 0.2
    # Early stopping watched the held-out tail of the training data.
    assert "val_loss" in model.history_
    assert model.n_epochs_ <= 20


def test_fast_path_equals_model_call(trained):
    model, _, (X_test, _) = trained
    inputs = model._inputs(model._align(X_test))
    reference = np.asarray(model.model_(inputs, training=False))
    np.testing.assert_allclose(model.predict_proba(X_test), reference, atol=1e-5)
    one = X_test.iloc[[3]]
    np.testing.assert_allclose(model.predict_proba(one), reference[[3]], atol=1e-5)


def test_explicit_validation_and_binary_output(seed):
    X, y = make_synthetic_tasks(1500, seed)
    labels = (y == 3).astype(int)
    model = KerasResourceClassifier(2, epochs=3, batch_size=256, patience=1).fit(
        X.iloc[:1000], labels[:1000], X_val=X.iloc[1000:], y_val=labels[1000:]
    )
    assert model.model_.layers[-1].activation.__name__ == "sigmoid"
    assert len(model.history_["val_loss"]) == model.n_epochs_
    proba = model.predict_proba(X.iloc[1000:])
    inputs = model._inputs(model._align(X.iloc[1000:]))
    positive = np.asarray(model.model_(inputs, training=False))[:, 0]
    np.testing.assert_allclose(proba[:, 1], positive, atol=1e-5)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)


def test_numeric_only_and_categorical_only_inputs(seed):
    X, y = make_synthetic_tasks(400, seed)
    for columns in (["log_nevents", "corecount"], ["processingtype"]):
        model = KerasResourceClassifier(4, epochs=1, batch_size=128).fit(X[columns], y)
        assert model.predict_proba(X[columns].iloc[:5]).shape == (5, 4)
        assert len(model.model_.inputs) == 1


def test_saved_files(trained, tmp_path):
    model, _, _ = trained
    model.save(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "forward.npz",
        "meta.json",
        "model.keras",
    ]
