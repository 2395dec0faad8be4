"""Gradient-boosted trees (XGBoost) that predict a task's resource bin.

Trees use the ``hist`` method with XGBoost's native categorical splits, so the
feature pipeline's categorical columns (software release, transformation, ...) go in
as they are, with no one-hot blow-up. Serving calls ``Booster.inplace_predict`` on the
DataFrame, which skips building a ``DMatrix``; a few rows of category codes go
straight to XGBoost's C prediction call (:mod:`.xgb_rows`), which skips the Python
wrapper's per-call work as well.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .base import ResourceClassifier, read_meta, write_meta
from .xgb_rows import RowPredictor
from .xgboost_import import import_xgboost

import_xgboost()  # first, so that the plain import below skips scikit-learn
import xgboost as xgb  # noqa: E402

#: File name of the saved booster (XGBoost's binary JSON, UBJSON).
BOOSTER_FILE = "booster.ubj"
#: Batches up to this many rows are predicted on one thread: for a single task the
#: OpenMP hand-off costs more than it saves, and on a busy 2-core host it makes
#: p50 latency 5-10x worse (measured: 1.3 ms vs 5-30 ms).
SMALL_BATCH = 64


class QuantisedParts:
    """The training and validation rows of every target, quantised once.

    ``fit`` builds a ``DMatrix`` and XGBoost quantises it into histogram bins for
    each model: at 4M tasks that is minutes of sketching and a full copy of the
    matrix per target and per candidate half-life. Here the features of the training
    and validation rows become one ``QuantileDMatrix`` each (the validation part
    shares the training part's bin edges); each fit only sets its labels and
    weights (:meth:`XGBoostResourceClassifier.fit_quantised`). A row whose label is
    unknown for a target gets weight 0 there, so the same rows serve all targets.

    Parameters
    ----------
    X_train, X_val : feature frames (the feature pipeline's columns, float32 and
        categorical), aligned to each other.
    max_bin : histogram bins per numeric feature; must equal the models' ``max_bin``.
    n_jobs : threads used to build the matrices.
    ref : another :class:`QuantisedParts` whose bin edges to reuse (a sample of the
        same training rows), or None to compute them from ``X_train``.
    """

    def __init__(
        self,
        X_train: pd.DataFrame,
        X_val: pd.DataFrame,
        *,
        max_bin: int = 256,
        n_jobs: int = 2,
        ref: QuantisedParts | None = None,
    ) -> None:
        if list(X_train.columns) != list(X_val.columns):
            raise ValueError(
                "The 'X_val' argument must have the columns of 'X_train' "
                f"({list(X_train.columns)}). Got {list(X_val.columns)} instead."
            )
        X_train, X_val = _as_float32(X_train), _as_float32(X_val)
        self.schema = X_train.iloc[:0]
        self.max_bin = max_bin
        self.n_train, self.n_val = len(X_train), len(X_val)
        common = {"max_bin": max_bin, "nthread": n_jobs, "enable_categorical": True}
        edges = None if ref is None else ref.train
        self.train: xgb.QuantileDMatrix = xgb.QuantileDMatrix(
            X_train, ref=edges, **common
        )
        self.val: xgb.QuantileDMatrix = xgb.QuantileDMatrix(
            X_val, ref=self.train, **common
        )


def _as_float32(X: pd.DataFrame) -> pd.DataFrame:
    """Return X with its numeric columns as float32, as ``fit`` aligns them."""
    wide = [
        c for c in X.columns if X[c].dtype.kind in "biuf" and X[c].dtype != np.float32
    ]
    return X.astype({c: np.float32 for c in wide}) if wide else X


class _RoundHook(xgb.callback.TrainingCallback):
    """Call ``on_step(rounds done)`` after every boosting round."""

    def __init__(self, on_step: Callable[[int], None]) -> None:
        super().__init__()
        self.on_step = on_step

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        self.on_step(epoch + 1)
        return False  # never stops training


class XGBoostResourceClassifier(ResourceClassifier):
    """Predict a resource bin with class-weighted gradient-boosted trees.

    Parameters
    ----------
    n_classes : number of bins; ``classes_`` is always ``arange(n_classes)``.
    n_estimators : maximum number of boosting rounds.
    learning_rate : shrinkage of each tree (XGBoost's ``eta``).
    max_depth : maximum depth of each tree.
    early_stopping_rounds : rounds without improvement of the validation loss before
        training stops; used only when ``X_val``/``y_val`` are given to ``fit``.
    class_weight : ``"balanced"``, a ``{class: weight}`` dict or ``None``.
    random_state : seed of XGBoost's sampling.
    n_jobs : threads XGBoost uses (the target machines have 2 cores).
    max_cat_to_onehot : categories below which a split is one-vs-rest (XGBoost).
    min_child_weight : minimum summed Hessian (weight) in a leaf.
    max_bin : histogram bins per numeric feature (XGBoost's ``hist``); fewer bins
        build each tree faster on millions of rows.
    subsample : share of the training rows each round samples (1.0: all).
    num_parallel_tree : trees grown per round, each on its own row sample, and
        averaged (a boosted forest; ``subsample`` below 1 makes them differ).
        Serving walks this many times the trees. Tried against the fit's
        variance and not kept (docs/models.md).
    """

    kind = "xgboost"

    def __init__(
        self,
        n_classes: int,
        n_estimators: int = 400,
        learning_rate: float = 0.1,
        max_depth: int = 8,
        early_stopping_rounds: int = 20,
        class_weight: str | dict[int, float] | None = "balanced",
        random_state: int = 0,
        n_jobs: int = 2,
        max_cat_to_onehot: int = 4,
        min_child_weight: float = 1.0,
        max_bin: int = 256,
        subsample: float = 1.0,
        num_parallel_tree: int = 1,
    ) -> None:
        self.n_classes = n_classes
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.early_stopping_rounds = early_stopping_rounds
        self.class_weight = class_weight
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.max_cat_to_onehot = max_cat_to_onehot
        self.min_child_weight = min_child_weight
        self.max_bin = max_bin
        self.subsample = subsample
        self.num_parallel_tree = num_parallel_tree

    def _booster_params(self) -> dict[str, Any]:
        """Return XGBoost's training parameters for this model."""
        params: dict[str, Any] = {
            "tree_method": "hist",
            "eta": self.learning_rate,
            "max_depth": self.max_depth,
            "min_child_weight": self.min_child_weight,
            "max_cat_to_onehot": self.max_cat_to_onehot,
            "max_bin": self.max_bin,
            "subsample": self.subsample,
            "num_parallel_tree": self.num_parallel_tree,
            "nthread": self.n_jobs,
            "seed": self.random_state,
        }
        if self.n_classes == 2:
            params.update(objective="binary:logistic", eval_metric="logloss")
        else:
            params.update(
                objective="multi:softprob",
                num_class=self.n_classes,
                eval_metric="mlogloss",
            )
        return params

    def fit(
        self,
        X: pd.DataFrame,
        y: Any,
        *,
        X_val: pd.DataFrame | None = None,
        y_val: Any = None,
        sample_weight: Any = None,
        on_step: Callable[[int], None] | None = None,
    ) -> XGBoostResourceClassifier:
        """Learn the trees; stop early on (X_val, y_val) when they are given.

        The validation loss is weighted with the training class weights, so early
        stopping watches the same objective the trees minimise. ``sample_weight``
        (one per row, e.g. a time decay) multiplies the class weights. ``on_step``
        is called with the number of rounds done after each one (a progress bar).
        """
        X, labels, X_val, labels_val = self._validate_fit(X, y, X_val, y_val)
        weights = self._class_weights(labels)
        train = xgb.DMatrix(
            X,
            label=labels,
            weight=weights[labels] * self._row_weights(sample_weight, len(labels)),
            enable_categorical=True,
        )
        evals: list[tuple[xgb.DMatrix, str]] = []
        if X_val is not None and labels_val is not None:
            val = xgb.DMatrix(
                X_val,
                label=labels_val,
                weight=weights[labels_val],
                enable_categorical=True,
            )
            evals = [(val, "validation")]
        return self._boost(train, evals, on_step)

    def _boost(
        self,
        train: xgb.DMatrix,
        evals: list[tuple[xgb.DMatrix, str]],
        on_step: Callable[[int], None] | None = None,
    ) -> XGBoostResourceClassifier:
        """Run the boosting rounds, stopping early on ``evals`` when given."""
        stopping = self.early_stopping_rounds if evals else None
        booster = xgb.train(
            self._booster_params(),
            train,
            num_boost_round=self.n_estimators,
            evals=evals,
            early_stopping_rounds=stopping,
            verbose_eval=False,
            callbacks=None if on_step is None else [_RoundHook(on_step)],
        )
        if stopping is not None:
            # Keep only the trees up to the best round, so serving, saving and the
            # plain Booster all predict the same thing with no iteration_range.
            booster = booster[: booster.best_iteration + 1]
        self.booster_ = booster
        self.n_estimators_ = booster.num_boosted_rounds()
        return self

    def fit_quantised(
        self,
        parts: QuantisedParts,
        y: Any,
        y_val: Any,
        *,
        sample_weight: Any = None,
        on_step: Callable[[int], None] | None = None,
    ) -> XGBoostResourceClassifier:
        """Learn the trees on pre-quantised rows (:class:`QuantisedParts`).

        ``y`` and ``y_val`` hold one class per training and validation row, or -1
        where the label is unknown: those rows weigh 0 in the trees and in early
        stopping. Otherwise the same model as :meth:`fit` on the labelled rows
        (class weights from the labelled rows, ``sample_weight`` multiplying them),
        up to the bin edges, which here come from all the rows.
        """
        if parts.max_bin != self.max_bin:
            raise ValueError(
                f"The 'parts' argument must be quantised with max_bin={self.max_bin} "
                f"like the model. Got max_bin={parts.max_bin} instead."
            )
        labels = self._check_labels(y, parts.n_train, "y", "X_train", lowest=-1)
        labels_val = self._check_labels(y_val, parts.n_val, "y_val", "X_val", lowest=-1)
        known = labels >= 0
        present = np.unique(labels[known])
        if present.size < 2:
            raise ValueError(
                "The 'y' argument must contain at least two classes. "
                f"Got only {present.tolist()} instead."
            )
        self._record_schema(parts.schema)
        classes = self._class_weights(labels[known])
        rows = self._row_weights(sample_weight, parts.n_train)
        parts.train.set_label(np.where(known, labels, 0))
        parts.train.set_weight(np.where(known, classes[labels] * rows, 0.0))
        val_known = labels_val >= 0
        parts.val.set_label(np.where(val_known, labels_val, 0))
        parts.val.set_weight(np.where(val_known, classes[labels_val], 0.0))
        return self._boost(parts.train, [(parts.val, "validation")], on_step)

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Return the probability of each class (columns follow ``classes_``)."""
        self._check_fitted("predict_proba")
        X = self._align(X)
        return self._predict_raw(X, len(X))

    def predict_proba_matrix(self, M: np.ndarray) -> np.ndarray:
        """Return the class probabilities of a float32 matrix of category codes.

        ``M`` has the ``feature_names_in_`` columns in order, categorical ones as
        their codes (see :meth:`accepts_codes`). The booster knows which columns
        are categorical, so the array gives exactly what the DataFrame gives,
        without pandas' per-call cost; up to :data:`SMALL_BATCH` rows take the C
        call of :class:`~.xgb_rows.RowPredictor` (the same numbers, less overhead).
        """
        self._check_fitted("predict_proba_matrix")
        M = self._check_matrix(M)
        if len(M) <= SMALL_BATCH:
            rows = self._row_predictor()
            if rows is not None:
                return self._shaped(rows.predict(M), len(M))
        return self._predict_raw(M, len(M))

    def _predict_raw(self, data: Any, n: int) -> np.ndarray:
        booster = self.booster_ if n > SMALL_BATCH else self._single_thread()
        raw = np.asarray(booster.inplace_predict(data, validate_features=False))
        return self._shaped(raw, n)

    def _shaped(self, raw: np.ndarray, n: int) -> np.ndarray:
        """Return the booster's flat output as (n, n_classes) probabilities."""
        if self.n_classes == 2:
            positive = raw.reshape(-1)
            return np.column_stack([1.0 - positive, positive]).astype(np.float32)
        return raw.reshape(n, self.n_classes)

    def _single_thread(self) -> xgb.Booster:
        """Return a one-thread copy of the booster for small batches (made once)."""
        if getattr(self, "_row_source", None) is not self.booster_:
            # A separate copy rather than toggling nthread keeps concurrent callers
            # (the HTTP service's threads) from changing each other's settings.
            row = self.booster_.copy()
            row.set_param({"nthread": 1})
            self._row_booster, self._row_source = row, self.booster_
        return self._row_booster

    def __getstate__(self) -> dict[str, Any]:
        """Leave out the row predictor (a library handle; rebuilt on first use)."""
        state = self.__dict__.copy()
        state.pop("_rows", None)
        state.pop("_rows_of", None)
        return state

    def _row_predictor(self) -> RowPredictor | None:
        """Return the C-API predictor of the one-thread booster (made once), or
        None where XGBoost's library cannot be reached that way."""
        booster = self._single_thread()
        if getattr(self, "_rows_of", None) is not booster:
            try:
                self._rows: RowPredictor | None = RowPredictor(booster)
            except RuntimeError:
                self._rows = None
            self._rows_of = booster
        return self._rows

    def save(self, directory: str | Path) -> Path:
        """Write the booster (UBJSON) and ``meta.json`` into ``directory``."""
        self._check_fitted("save")
        directory = Path(directory)
        meta = self._meta()
        meta["n_estimators_"] = self.n_estimators_
        write_meta(directory, meta)
        self.booster_.save_model(directory / BOOSTER_FILE)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> XGBoostResourceClassifier:
        """Return the model saved in ``directory`` by :meth:`save`."""
        directory = Path(directory)
        meta = read_meta(directory, cls.kind)
        model = cls(**meta["params"])
        model._restore_meta(meta)
        booster = xgb.Booster()
        booster.load_model(directory / BOOSTER_FILE)
        booster.set_param({"nthread": model.n_jobs})
        model.booster_ = booster
        model.n_estimators_ = int(meta["n_estimators_"])
        return model
