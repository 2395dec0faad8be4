"""The Keras network's forward pass in numpy, so serving never imports TensorFlow.

Importing TensorFlow costs seconds, more than the whole ``predict`` budget of one
task. At inference the network is only arithmetic: embedding look-ups, Dense layers,
BatchNormalization with its moving statistics, ReLU (Dropout does nothing) and a
softmax or sigmoid. :func:`export_forward` copies those weights into plain arrays,
which :meth:`KerasResourceClassifier.save` writes next to the ``.keras`` file as
``forward.npz``; :class:`NumpyKerasClassifier` loads them (and ``meta.json``) without
TensorFlow. Keras' own call gives the same probabilities within 1e-5 (tested); the
network trained in memory predicts with this pass too, so training scores its
validation part with the bits serving gives.

The pass runs in float64 and rounds the probabilities to float32 at the end. In
float32, as Keras computes, a task's probabilities changed in their last bits
with the batch it came in (the BLAS kernel a product takes depends on the matrix
sizes): alone through the service and in a batch through the benchmark, one task
got costs and confidences apart in 1 to 3 % of 3,000 tasks. In float64 those
differences are some 1e-16, far below float32's rounding, so a task gets the same
float32 probabilities alone and in any batch (tested on every path), at about
twice the products' time in a large batch.

This module also holds what both runtimes share: the constructor parameters, the
preprocessing from a DataFrame or a code matrix to the network's inputs, and the
prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from panda_predictor.core.identity_cache import cached_by_identity

from .base import ResourceClassifier, read_meta

if TYPE_CHECKING:
    import keras

#: File of the exported weights, next to ``model.keras``.
FORWARD_FILE = "forward.npz"
#: Output activations the numpy forward knows.
OUTPUT_ACTIVATIONS = ("softmax", "sigmoid")


class KerasClassifierBase(ResourceClassifier):
    """Parameters, preprocessing and prediction shared by the two runtimes.

    Both predict with the numpy forward pass of the exported weights
    (``forward_``): a network just trained predicts what it will predict when
    served, to the last bit, so the figures training records with it (the
    calibration fit, the price replay, the gate's metrics) are the served ones.

    Parameters
    ----------
    n_classes : number of bins; ``classes_`` is always ``arange(n_classes)``.
    epochs : maximum number of passes over the training data.
    batch_size : rows per gradient step.
    learning_rate : Adam's step size.
    l2 : L2 penalty on every Dense kernel.
    patience : epochs without a better validation loss before training stops (the
        best weights are restored).
    class_weight : ``"balanced"``, a ``{class: weight}`` dict or ``None``.
    random_state : seed passed to ``keras.utils.set_random_seed``.
    validation_fraction : share of the rows, taken from the end (the newest tasks,
        as the feature pipeline orders rows by time), held out for early stopping
        when ``fit`` gets no ``X_val``.
    verbose : Keras' ``fit`` verbosity.
    """

    kind = "keras"
    #: Which library holds the network: "tensorflow" (it can train and save) or
    #: "numpy" (the exported weights alone, no TensorFlow import).
    runtime = ""

    numeric_features_: list[str]
    categorical_features_: list[str]
    indicator_features_: list[str]
    means_: np.ndarray
    stds_: np.ndarray
    #: The weights as :func:`export_forward` returns them: what both runtimes
    #: predict with.
    forward_: dict[str, np.ndarray]

    def __init__(
        self,
        n_classes: int,
        epochs: int = 50,
        batch_size: int = 1024,
        learning_rate: float = 1e-3,
        l2: float = 1e-5,
        patience: int = 4,
        class_weight: str | dict[int, float] | None = "balanced",
        random_state: int = 0,
        validation_fraction: float = 0.1,
        verbose: int = 0,
    ) -> None:
        self.n_classes = n_classes
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.l2 = l2
        self.patience = patience
        self.class_weight = class_weight
        self.random_state = random_state
        self.validation_fraction = validation_fraction
        self.verbose = verbose

    def predict_proba(self, X: Any) -> np.ndarray:
        """Return the probability of each class (columns follow ``classes_``)."""
        self._check_fitted("predict_proba")
        inputs = self._inputs(self._align(X))
        return self._finish(forward_layers(self._layers(), inputs))

    def predict_proba_matrix(self, M: np.ndarray) -> np.ndarray:
        """Return the class probabilities of a float32 matrix of category codes.

        ``M`` has the ``feature_names_in_`` columns in order, categorical ones as
        their codes (see :meth:`accepts_codes`).
        """
        self._check_fitted("predict_proba_matrix")
        M = self._check_matrix(M)
        return self._finish(forward_layers(self._layers(), self._matrix_inputs(M)))

    def _layers(self) -> Layers:
        """Return the weights as :class:`Layers`, made once per set of weights."""
        return cached_by_identity(
            self, "_layers_cache", (self.forward_,), lambda: layers_of(self.forward_)
        )

    def _inputs(self, X: pd.DataFrame) -> list[np.ndarray]:
        """Turn an aligned DataFrame into the network's input arrays."""
        arrays: list[np.ndarray] = []
        if self.numeric_features_:
            values = X[self.numeric_features_].to_numpy(np.float32, na_value=np.nan)
            arrays.append(self._scaled(values))
        for col in self.categorical_features_:
            codes = X[col].cat.codes.to_numpy(np.int32)
            # Missing values (code -1) share the reserved __unknown__ slot, code 0.
            arrays.append(np.maximum(codes, 0).reshape(-1, 1))
        return arrays

    def _matrix_inputs(self, M: np.ndarray) -> list[np.ndarray]:
        """Turn a float32 code matrix (``feature_names_in_`` order) into inputs."""
        numeric, categorical, _ = self._layout()
        arrays: list[np.ndarray] = []
        if self.numeric_features_:
            arrays.append(self._scaled(M[:, numeric]))
        if categorical:
            # All code columns in one pass; each input is a column of the result.
            codes = np.nan_to_num(M[:, categorical], nan=0.0).astype(np.int32)
            codes = np.maximum(codes, 0)
            arrays += [codes[:, i : i + 1] for i in range(len(categorical))]
        return arrays

    def _scaled(self, values: np.ndarray) -> np.ndarray:
        """Standardise numeric values; a gap becomes 0 plus its indicator column."""
        finite = np.isfinite(values)
        with np.errstate(invalid="ignore"):
            # One new array, updated in place (the steps of the plain formula).
            scaled = values - self.means_
            scaled /= self.stds_
        scaled[~finite] = 0.0
        if self.indicator_features_:
            scaled = np.concatenate([scaled, ~finite[:, self._layout()[2]]], axis=1)
        return scaled.astype(np.float32, copy=False)

    def _layout(self) -> tuple[list[int], list[int], list[int]]:
        """Return where the inputs come from, found once per fitted schema: the
        code matrix's columns of the numeric and of the categorical features, and
        the numeric features' positions that get a gap indicator.

        Finding them by name on every call cost about 0.2 ms per network (one
        ``list.index`` per feature), most of one task's prediction.
        """

        def build() -> tuple[list[int], list[int], list[int]]:
            names = [str(c) for c in getattr(self, "feature_names_in_", ())]
            position = {name: j for j, name in reversed(list(enumerate(names)))}
            numeric = list(self.numeric_features_)
            return (
                [position[c] for c in numeric] if names else [],
                [position[c] for c in self.categorical_features_] if names else [],
                [numeric.index(c) for c in self.indicator_features_],
            )

        sources = (
            getattr(self, "feature_names_in_", None),
            self.numeric_features_,
            self.categorical_features_,
            self.indicator_features_,
        )
        return cached_by_identity(self, "_layout_cache", sources, build)

    def _finish(self, out: np.ndarray) -> np.ndarray:
        """Return the network output as one probability column per class."""
        if self.n_classes == 2:
            return np.column_stack([1.0 - out[:, 0], out[:, 0]])
        return out

    def _restore_scaling(self, meta: dict[str, Any]) -> None:
        """Set the learned schema and scaling from a saved ``meta.json``."""
        self._restore_meta(meta)
        self.numeric_features_ = list(meta["numeric_features"])
        self.categorical_features_ = list(meta["categorical_features"])
        self.indicator_features_ = list(meta["indicator_features"])
        self.means_ = np.asarray(meta["means"], dtype=np.float32)
        self.stds_ = np.asarray(meta["stds"], dtype=np.float32)
        self.n_epochs_ = int(meta["n_epochs_"])


def export_forward(network: keras.Model) -> dict[str, np.ndarray]:
    """Return the weights of a trained network as named arrays for the numpy pass.

    Keys: ``embedding_<i>`` (one table per categorical input, in input order),
    ``dense_<k>_kernel``/``_bias``, ``bn_<k>_gamma``/``_beta``/``_mean``/``_var``/
    ``_epsilon`` in layer order, and ``output_activation``. Refuses a layer the numpy
    pass does not compute rather than export something that predicts differently.
    """
    arrays: dict[str, np.ndarray] = {}
    dense = norm = 0
    activation = ""
    for layer in network.layers:
        kind = type(layer).__name__
        if kind == "Embedding":
            arrays[layer.name] = np.asarray(layer.embeddings, dtype=np.float32)
        elif kind == "Dense":
            arrays[f"dense_{dense}_kernel"] = np.asarray(layer.kernel, np.float32)
            arrays[f"dense_{dense}_bias"] = np.asarray(layer.bias, np.float32)
            activation = layer.activation.__name__
            dense += 1
        elif kind == "BatchNormalization":
            arrays[f"bn_{norm}_gamma"] = np.asarray(layer.gamma, np.float32)
            arrays[f"bn_{norm}_beta"] = np.asarray(layer.beta, np.float32)
            arrays[f"bn_{norm}_mean"] = np.asarray(layer.moving_mean, np.float32)
            arrays[f"bn_{norm}_var"] = np.asarray(layer.moving_variance, np.float32)
            arrays[f"bn_{norm}_epsilon"] = np.asarray(layer.epsilon, np.float32)
            norm += 1
        elif kind == "Activation":
            if layer.activation.__name__ != "relu":
                raise ValueError(
                    "The hidden activations must be 'relu' for the numpy forward "
                    f"pass. Got {layer.activation.__name__!r} instead."
                )
        elif kind not in ("InputLayer", "Flatten", "Concatenate", "Dropout"):
            raise ValueError(
                "The network must hold only Embedding, Dense, BatchNormalization, "
                f"ReLU, Flatten, Concatenate and Dropout layers. Got {kind} instead."
            )
    if dense != norm + 1 or activation not in OUTPUT_ACTIVATIONS:
        raise ValueError(
            "The network must be Dense-BatchNormalization-ReLU blocks and a softmax "
            f"or sigmoid Dense output. Got {dense} Dense and {norm} "
            f"BatchNormalization layers, output {activation!r} instead."
        )
    arrays["output_activation"] = np.asarray(activation)
    return arrays


#: Rows per pass through the network. A 1,024-row block's widest layer (256
#: float64 columns, 2 MB) stays in the cache between the steps of a layer, where a
#: whole 100,000-task batch (205 MB per layer) went to memory and back at each
#: step: twice the speed of one pass over the batch (2026-12-05, 100,000 tasks,
#: 0.59 s -> 0.29 s per network with the folding below). The block size changes
#: no bits a caller sees (the module doc: float64, rounded at the end).
ROWS_PER_PASS = 1024


@dataclass(frozen=True)
class Layers:
    """The exported weights in the order the forward pass uses them, in float64.

    Each BatchNormalization is folded into the Dense layer before it:
    ``(x W + b - mean) * scale + beta`` with ``scale = gamma / sqrt(var + eps)``
    is ``x (W * scale) + ((b - mean) * scale + beta)``, one product and one sum
    per layer instead of four element-wise passes over the rows (``scale`` from
    the float32 weights, as Keras computes it).
    """

    embeddings: tuple[np.ndarray, ...]
    #: (kernel, bias) of each Dense layer with its BatchNormalization folded in.
    blocks: tuple[tuple[np.ndarray, np.ndarray], ...]
    output: tuple[np.ndarray, np.ndarray]
    sigmoid: bool


def layers_of(arrays: dict[str, np.ndarray]) -> Layers:
    """Return :class:`Layers` of :func:`export_forward`'s arrays."""

    def wide(name: str) -> np.ndarray:
        return np.asarray(arrays[name], dtype=np.float64)

    embeddings: list[np.ndarray] = []
    while f"embedding_{len(embeddings)}" in arrays:
        embeddings.append(wide(f"embedding_{len(embeddings)}"))
    blocks: list[tuple[np.ndarray, np.ndarray]] = []
    k = 0
    while f"bn_{k}_gamma" in arrays:
        scale = np.asarray(
            arrays[f"bn_{k}_gamma"]
            / np.sqrt(arrays[f"bn_{k}_var"] + arrays[f"bn_{k}_epsilon"]),
            dtype=np.float64,
        )
        bias = (wide(f"dense_{k}_bias") - wide(f"bn_{k}_mean")) * scale
        blocks.append((wide(f"dense_{k}_kernel") * scale, bias + wide(f"bn_{k}_beta")))
        k += 1
    return Layers(
        tuple(embeddings),
        tuple(blocks),
        (wide(f"dense_{k}_kernel"), wide(f"dense_{k}_bias")),
        str(arrays["output_activation"]) == "sigmoid",
    )


def forward_layers(layers: Layers, inputs: list[np.ndarray]) -> np.ndarray:
    """Return the network output for ``inputs`` (numeric block first, then codes).

    The numeric block is present when the first input is float; each code input
    indexes its embedding table. Computed in float64 in blocks of
    :data:`ROWS_PER_PASS` rows, returned as float32 (module doc: the same answer
    alone and in any batch).
    """
    n = len(inputs[0])
    width = layers.output[0].shape[1]
    out = np.empty((n, width), dtype=np.float32)
    for start in range(0, n, ROWS_PER_PASS):
        rows = slice(start, start + ROWS_PER_PASS)
        out[rows] = forward64(layers, [a[rows] for a in inputs])
    return out


def forward64(layers: Layers, inputs: list[np.ndarray]) -> np.ndarray:
    """Return the network output for ``inputs`` in float64 (one block of rows)."""
    parts: list[np.ndarray] = []
    codes = inputs
    if inputs and inputs[0].dtype.kind == "f":
        parts.append(inputs[0].astype(np.float64))
        codes = inputs[1:]
    for table, code in zip(layers.embeddings, codes, strict=True):
        parts.append(table[code[:, 0]])
    h = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    # Each product makes a new array, which the steps after it update in place.
    for kernel, bias in layers.blocks:
        h = h @ kernel
        h += bias
        np.maximum(h, 0.0, out=h)
    kernel, bias = layers.output
    logits = h @ kernel
    logits += bias
    if layers.sigmoid:
        return 1.0 / (1.0 + np.exp(-logits))
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    logits /= logits.sum(axis=1, keepdims=True)
    return logits


class NumpyKerasClassifier(KerasClassifierBase):
    """A saved Keras network served by the numpy forward pass (no TensorFlow).

    Loaded by :func:`panda_predictor.models.load_classifier` when the model folder
    holds ``forward.npz``; it predicts but does not train or save (train a
    :class:`~panda_predictor.models.keras_net.KerasResourceClassifier`).
    """

    runtime = "numpy"

    def fit(self, X: Any, y: Any, **kwargs: Any) -> NumpyKerasClassifier:
        """Refuse: this runtime only serves a network trained with Keras."""
        raise TypeError(
            "NumpyKerasClassifier only predicts; fit a KerasResourceClassifier instead."
        )

    def save(self, directory: str | Path) -> Path:
        """Refuse: the ``.keras`` file is the model of record; copy the folder."""
        raise TypeError(
            "NumpyKerasClassifier cannot save; copy the model folder, or save the "
            "KerasResourceClassifier it was exported from."
        )

    @classmethod
    def load(cls, directory: str | Path) -> NumpyKerasClassifier:
        """Return the network saved in ``directory``, served by numpy."""
        directory = Path(directory)
        meta = read_meta(directory, cls.kind)
        model = cls(**meta["params"])
        model._restore_scaling(meta)
        with np.load(directory / FORWARD_FILE, allow_pickle=False) as saved:
            model.forward_ = {name: saved[name] for name in saved.files}
        return model


def has_forward(directory: str | Path) -> bool:
    """Return whether a Keras model folder holds the exported numpy weights."""
    return (Path(directory) / FORWARD_FILE).is_file()


__all__ = [
    "FORWARD_FILE",
    "KerasClassifierBase",
    "NumpyKerasClassifier",
    "ROWS_PER_PASS",
    "export_forward",
    "forward64",
    "forward_layers",
    "has_forward",
    "layers_of",
]
