"""A feed-forward network (Keras 3 on TensorFlow) that predicts a task's resource bin.

Numeric features are standardised with statistics learned in ``fit``; a missing value
becomes 0 after scaling plus a 0/1 indicator column (only for columns that had gaps
in training). Each categorical feature gets its own embedding of dimension
``min(32, floor(log2(cardinality)) + 1)``. The concatenation feeds Dense 256-128-64
blocks (BatchNormalization, ReLU, Dropout 0.4/0.3/0.3, L2 on the kernels) and a
softmax (sigmoid for two classes). Keras trains it; once trained it predicts with
the numpy forward pass of :mod:`.keras_numpy` on its exported weights (not
``Model.predict``, whose per-call set-up costs ~50 ms), and ``save`` writes those
weights, so serving computes the same bits without importing TensorFlow at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .backend import import_keras
from .base import read_meta, write_meta
from .keras_numpy import FORWARD_FILE, KerasClassifierBase, export_forward

if TYPE_CHECKING:
    import keras
else:
    keras, _ = import_keras()

#: File name of the saved Keras model.
MODEL_FILE = "model.keras"
#: Widths and dropout rates of the hidden blocks.
HIDDEN = ((256, 0.4), (128, 0.3), (64, 0.3))


def embedding_dim(cardinality: int) -> int:
    """Return the embedding width for a feature with ``cardinality`` categories."""
    return min(32, math.floor(math.log2(max(cardinality, 1))) + 1)


class KerasResourceClassifier(KerasClassifierBase):
    """Predict a resource bin with a class-weighted embedding + dense network.

    Parameters: see :class:`~panda_predictor.models.keras_numpy.KerasClassifierBase`.
    ``save`` also exports the weights for the numpy forward pass (``forward.npz``),
    which serving loads instead of TensorFlow.
    """

    runtime = "tensorflow"

    # ---- preprocessing ----------------------------------------------------------
    def _learn_scaling(self, X: pd.DataFrame) -> None:
        """Learn means, standard deviations and which columns need an indicator."""
        self.numeric_features_ = [
            str(c) for c in self.feature_names_in_ if str(c) not in self.categories_
        ]
        self.categorical_features_ = [
            str(c) for c in self.feature_names_in_ if str(c) in self.categories_
        ]
        values = X[self.numeric_features_].to_numpy(np.float64, na_value=np.nan)
        finite = np.isfinite(values)
        count = finite.sum(axis=0)
        filled = np.where(finite, values, 0.0)
        mean = filled.sum(axis=0) / np.maximum(count, 1)
        var = (np.where(finite, values - mean, 0.0) ** 2).sum(axis=0) / np.maximum(
            count, 1
        )
        std = np.sqrt(var)
        self.means_ = mean.astype(np.float32)
        # A constant (or empty) column scales by 1 instead of dividing by zero.
        self.stds_ = np.where(std > 0, std, 1.0).astype(np.float32)
        self.indicator_features_ = [
            c
            for c, ok in zip(self.numeric_features_, finite.all(axis=0), strict=True)
            if not ok
        ]

    # ---- network ------------------------------------------------------------------
    def _build(self) -> keras.Model:
        """Return the (uncompiled) network for the learned input schema."""
        inputs: list[Any] = []
        parts: list[Any] = []
        n_numeric = len(self.numeric_features_) + len(self.indicator_features_)
        if n_numeric:
            numeric = keras.Input(shape=(n_numeric,), dtype="float32", name="numeric")
            inputs.append(numeric)
            parts.append(numeric)
        for i, col in enumerate(self.categorical_features_):
            card = len(self.categories_[col])
            cat_in = keras.Input(shape=(1,), dtype="int32", name=f"cat_{i}")
            emb = keras.layers.Embedding(
                card, embedding_dim(card), name=f"embedding_{i}"
            )(cat_in)
            inputs.append(cat_in)
            parts.append(keras.layers.Flatten(name=f"flatten_{i}")(emb))
        h = parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)
        reg = keras.regularizers.L2(self.l2)
        for width, rate in HIDDEN:
            h = keras.layers.Dense(width, kernel_regularizer=reg)(h)
            h = keras.layers.BatchNormalization()(h)
            h = keras.layers.Activation("relu")(h)
            h = keras.layers.Dropout(rate, seed=self.random_state)(h)
        if self.n_classes == 2:
            out = keras.layers.Dense(1, activation="sigmoid", kernel_regularizer=reg)(h)
        else:
            out = keras.layers.Dense(
                self.n_classes, activation="softmax", kernel_regularizer=reg
            )(h)
        return keras.Model(inputs, out, name="resource_classifier")

    # ---- estimator API --------------------------------------------------------------
    def fit(
        self,
        X: pd.DataFrame,
        y: Any,
        *,
        X_val: pd.DataFrame | None = None,
        y_val: Any = None,
        sample_weight: Any = None,
        on_step: Callable[[int], None] | None = None,
    ) -> KerasResourceClassifier:
        """Learn scaling and weights; stop early on validation loss.

        Without ``X_val`` the newest ``validation_fraction`` of the rows (the tail)
        is held out, so early stopping judges the model on later tasks than it saw.
        ``sample_weight`` (one per row) multiplies the class weights. ``on_step`` is
        called with the number of epochs done after each one (a progress bar).
        """
        X, labels, X_val, labels_val = self._validate_fit(X, y, X_val, y_val)
        row_weights = self._row_weights(sample_weight, len(labels))
        keras.utils.set_random_seed(self.random_state)
        if X_val is None:
            n_val = int(len(X) * self.validation_fraction)
            if n_val >= 1 and len(X) - n_val >= 1:
                X, X_val = X.iloc[:-n_val], X.iloc[-n_val:]
                labels, labels_val = labels[:-n_val], labels[-n_val:]
                row_weights = row_weights[:-n_val]
        weights = self._class_weights(labels)
        self._learn_scaling(X)
        self.model_ = self._build()
        binary = self.n_classes == 2
        self.model_.compile(
            optimizer=keras.optimizers.Adam(self.learning_rate),
            loss="binary_crossentropy" if binary else "sparse_categorical_crossentropy",
        )

        def target(lab: np.ndarray) -> np.ndarray:
            return lab.astype(np.float32).reshape(-1, 1) if binary else lab

        validation = None
        monitor = "loss"
        if X_val is not None and labels_val is not None:
            validation = (
                self._inputs(X_val),
                target(labels_val),
                weights[labels_val].astype(np.float32),
            )
            monitor = "val_loss"
        stop = keras.callbacks.EarlyStopping(
            monitor=monitor, patience=self.patience, restore_best_weights=True
        )
        history = self.model_.fit(
            self._inputs(X),
            target(labels),
            sample_weight=(weights[labels] * row_weights).astype(np.float32),
            validation_data=validation,
            epochs=self.epochs,
            batch_size=self.batch_size,
            callbacks=[stop, *_epoch_hook(on_step)],
            shuffle=True,
            verbose=self.verbose,
        )
        self.n_epochs_ = len(history.history["loss"])
        self.history_ = {k: [float(v) for v in vs] for k, vs in history.history.items()}
        self.forward_ = export_forward(self.model_)
        return self

    # ---- persistence --------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write the ``.keras`` model and ``meta.json`` (scaling, categories)."""
        self._check_fitted("save")
        directory = Path(directory)
        meta = self._meta()
        meta.update(
            numeric_features=self.numeric_features_,
            categorical_features=self.categorical_features_,
            indicator_features=self.indicator_features_,
            means=self.means_.tolist(),
            stds=self.stds_.tolist(),
            n_epochs_=self.n_epochs_,
        )
        write_meta(directory, meta)
        self.model_.save(directory / MODEL_FILE)
        arrays: dict[str, Any] = self.forward_
        np.savez(directory / FORWARD_FILE, **arrays)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> KerasResourceClassifier:
        """Return the model saved in ``directory`` by :meth:`save`."""
        directory = Path(directory)
        meta = read_meta(directory, cls.kind)
        model = cls(**meta["params"])
        model._restore_scaling(meta)
        model.model_ = keras.models.load_model(directory / MODEL_FILE, compile=False)
        model.forward_ = export_forward(model.model_)
        return model


def _epoch_hook(on_step: Callable[[int], None] | None) -> list[Any]:
    """Return a Keras callback calling ``on_step(epochs done)``, or none."""
    if on_step is None:
        return []
    return [keras.callbacks.LambdaCallback(on_epoch_end=lambda e, _: on_step(e + 1))]
