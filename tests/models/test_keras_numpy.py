"""The numpy forward pass of the Keras network equals Keras and needs no TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from panda_predictor.models import keras_numpy, load_classifier
from panda_predictor.models.keras_net import KerasResourceClassifier
from panda_predictor.models.keras_numpy import (
    NumpyKerasClassifier,
    export_forward,
    forward64,
    forward_layers,
    has_forward,
    layers_of,
)
from panda_predictor.models.latency import make_synthetic_tasks

MODULE_SEED = 31


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Return (Keras model, its folder, held-out rows) for a network fitted once."""
    X, y = make_synthetic_tasks(1500, MODULE_SEED)
    model = KerasResourceClassifier(4, epochs=4, batch_size=256, random_state=2)
    model.fit(X.iloc[:1200], y[:1200])
    folder = model.save(tmp_path_factory.mktemp("keras") / "m")
    return model, folder, X.iloc[1200:]


def keras_call(model, X):
    """Return Keras' own probabilities (the network called, not the numpy pass)."""
    out = np.asarray(model.model_(model._inputs(model._align(X)), training=False))
    return model._finish(out)


def test_numpy_forward_equals_keras(saved):
    model, folder, X = saved
    served = load_classifier(folder)
    assert isinstance(served, NumpyKerasClassifier)
    reference = keras_call(model, X)
    np.testing.assert_allclose(served.predict_proba(X), reference, atol=1e-5)
    # A single task and the code-matrix route give the same numbers too.
    np.testing.assert_allclose(
        served.predict_proba(X.iloc[[7]]), reference[[7]], atol=1e-5
    )
    codes = code_matrix(model, X)
    np.testing.assert_allclose(served.predict_proba_matrix(codes), reference, atol=1e-5)
    assert served.classes_.tolist() == [0, 1, 2, 3]


def test_the_trained_network_predicts_the_served_bits(saved):
    """Training scores its validation part with the network in memory (the
    calibration fit, the price replay, the gate's metrics): those must be the
    probabilities serving computes from the saved folder, to the last bit."""
    model, folder, X = saved
    served = load_classifier(folder)
    np.testing.assert_array_equal(model.predict_proba(X), served.predict_proba(X))
    codes = code_matrix(model, X)
    np.testing.assert_array_equal(
        model.predict_proba_matrix(codes), served.predict_proba_matrix(codes)
    )
    reloaded = load_classifier(folder, runtime="tensorflow")
    assert isinstance(reloaded, KerasResourceClassifier)
    np.testing.assert_array_equal(reloaded.predict_proba(X), served.predict_proba(X))


def test_the_folded_pass_is_the_plain_formula(saved):
    """``forward64`` folds each BatchNormalization into its Dense layer and
    updates each product in place: the result must be the plain formula's on the
    exported weights (Dense, then BatchNormalization, ReLU) to float64's
    precision, ``forward_layers`` that rounded to float32, and the inputs
    untouched."""
    _, folder, X = saved
    served = load_classifier(folder)
    weights = served.forward_.items()
    w = {k: np.asarray(v, np.float64) for k, v in weights if k != "output_activation"}
    inputs = served._matrix_inputs(code_matrix(served, X))
    before = [a.copy() for a in inputs]
    tables = [w[f"embedding_{i}"] for i in range(len(inputs) - 1)]
    parts = [inputs[0].astype(np.float64)]
    parts += [t[c[:, 0]] for t, c in zip(tables, inputs[1:], strict=True)]
    h = np.concatenate(parts, axis=1)
    for k in range(3):
        dense = h @ w[f"dense_{k}_kernel"] + w[f"dense_{k}_bias"]
        scale = served.forward_[f"bn_{k}_gamma"] / np.sqrt(
            served.forward_[f"bn_{k}_var"] + served.forward_[f"bn_{k}_epsilon"]
        )
        normed = (dense - w[f"bn_{k}_mean"]) * scale.astype(np.float64)
        h = np.maximum(normed + w[f"bn_{k}_beta"], 0.0)
    logits = h @ w["dense_3_kernel"] + w["dense_3_bias"]
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    plain = exp / exp.sum(axis=1, keepdims=True)
    layers = layers_of(served.forward_)
    assert all(k.dtype == np.float64 for k, _ in layers.blocks)
    wide = forward64(layers, inputs)
    np.testing.assert_allclose(wide, plain, rtol=1e-12, atol=1e-15)
    got = forward_layers(layers, inputs)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, wide.astype(np.float32))
    for was, now in zip(before, inputs, strict=True):
        np.testing.assert_array_equal(was, now)


def test_blocks_of_rows_give_each_row_its_own_bits(saved, monkeypatch):
    """A batch goes through the network in blocks of ROWS_PER_PASS rows: every
    row gets the bits it gets alone, whichever block it falls in."""
    _, folder, X = saved
    served = load_classifier(folder)
    layers = layers_of(served.forward_)
    inputs = served._matrix_inputs(code_matrix(served, X))
    monkeypatch.setattr(keras_numpy, "ROWS_PER_PASS", 64)
    batch = forward_layers(layers, inputs)
    assert len(batch) == len(X) > 4 * 64
    for i in (0, 63, 64, 65, 200, len(X) - 1):
        alone = forward_layers(layers, [a[i : i + 1] for a in inputs])
        np.testing.assert_array_equal(alone[0], batch[i])
    assert forward_layers(layers, [a[:0] for a in inputs]).shape == (0, 4)


def test_scaling_in_place_gives_the_plain_formulas_bits(saved):
    """Numeric inputs are standardised in place: the plain formula's bits, a gap
    (NaN or infinite) at 0 with its indicator column."""
    _, folder, X = saved
    served = load_classifier(folder)
    values = X[served.numeric_features_].to_numpy(np.float32, na_value=np.nan).copy()
    values[::7, 0] = np.nan
    values[3::11, -1] = np.inf
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore"):
        plain = np.where(finite, (values - served.means_) / served.stds_, 0.0)
    indicators = [served.numeric_features_.index(c) for c in served.indicator_features_]
    plain = np.concatenate([plain, ~finite[:, indicators]], axis=1)
    assert served.indicator_features_  # the indicator columns are compared too
    got = served._scaled(values)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, plain.astype(np.float32))


def code_matrix(model, X) -> np.ndarray:
    """Return ``X`` as the float32 code matrix the records route gives."""
    return np.column_stack(
        [
            X[c].cat.codes.to_numpy(np.float32)
            if c in model.categories_
            else X[c].to_numpy(np.float32)
            for c in model.feature_names_in_
        ]
    )


def test_code_matrix_inputs_are_the_frames_and_follow_a_new_schema(saved):
    """The code matrix's columns are found once per schema (not by name on every
    call): the inputs equal the frame route's exactly, and a schema replaced as
    loading replaces it is read anew."""
    model, folder, X = saved
    served = load_classifier(folder)
    codes = code_matrix(model, X)

    def both() -> tuple[list[np.ndarray], list[np.ndarray]]:
        return served._matrix_inputs(codes), served._inputs(served._align(X))

    before, frame = both()
    assert len(before) == len(frame) > 1
    for got, want in zip(before, frame, strict=True):
        np.testing.assert_array_equal(got, want)
    served.numeric_features_ = served.numeric_features_[::-1]
    served.means_, served.stds_ = served.means_[::-1], served.stds_[::-1]
    after, frame = both()
    for got, want in zip(after, frame, strict=True):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(after[0], before[0])


def test_binary_sigmoid_network_equals_keras(seed, tmp_path):
    X, y = make_synthetic_tasks(800, seed)
    labels = (y >= 2).astype(int)
    model = KerasResourceClassifier(2, epochs=2, batch_size=128).fit(X, labels)
    served = NumpyKerasClassifier.load(model.save(tmp_path / "b"))
    assert str(served.forward_["output_activation"]) == "sigmoid"
    np.testing.assert_allclose(
        served.predict_proba(X.iloc[:50]), keras_call(model, X.iloc[:50]), atol=1e-5
    )


def test_folder_without_export_loads_with_keras(saved, tmp_path):
    import shutil

    _, folder, X = saved
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    (old / "forward.npz").unlink()
    assert not has_forward(old)
    model = load_classifier(old)
    assert isinstance(model, KerasResourceClassifier)
    assert model.predict_proba(X.iloc[:3]).shape == (3, 4)
    assert isinstance(load_classifier(folder, runtime="tensorflow"), type(model))


def test_export_refuses_an_unknown_layer():
    import keras

    net = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(4), keras.layers.LayerNormalization()]
    )
    with pytest.raises(ValueError, match="Got LayerNormalization instead"):
        export_forward(net)


def test_numpy_model_refuses_to_fit_or_save(saved, tmp_path):
    _, folder, X = saved
    served = load_classifier(folder)
    with pytest.raises(TypeError, match="only predicts"):
        served.fit(X, np.zeros(len(X), int))
    with pytest.raises(TypeError, match="cannot save"):
        served.save(tmp_path / "x")


def test_loading_a_numpy_network_does_not_import_tensorflow(saved):
    _, folder, X = saved
    code = (
        "import sys\n"
        "from panda_predictor.models import load_classifier\n"
        "from panda_predictor.models.latency import make_synthetic_tasks\n"
        f"m = load_classifier({str(folder)!r})\n"
        "X, _ = make_synthetic_tasks(20, 1)\n"
        "assert m.predict_proba(X).shape == (20, 4)\n"
        "print(sorted(k for k in ('tensorflow', 'keras') if k in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stderr
