"""Gradient-boosted trees (XGBoost) that predict a task's resource bin.

Trees use the ``hist`` method with XGBoost's native categorical splits, so the
feature pipeline's categorical columns (software release, transformation, ...) go in
as they are, with no one-hot blow-up. Serving calls ``Booster.inplace_predict`` on the
DataFrame, which skips building a ``DMatrix`` and keeps one row well under 2 ms.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .base import ResourceClassifier, read_meta, write_meta
from .xgboost_import import import_xgboost

import_xgboost()  # first, so that the plain import below skips scikit-learn
import xgboost as xgb  # noqa: E402

#: File name of the saved booster (XGBoost's binary JSON, UBJSON).
BOOSTER_FILE = "booster.ubj"
#: Batches up to this many rows are predicted on one thread: for a single task the
#: OpenMP hand-off costs more than it saves, and on a busy 2-core host it makes
#: p50 latency 5-10x worse (measured: 1.3 ms vs 5-30 ms).
SMALL_BATCH = 64


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
    ) -> XGBoostResourceClassifier:
        """Learn the trees; stop early on (X_val, y_val) when they are given.

        The validation loss is weighted with the training class weights, so early
        stopping watches the same objective the trees minimise. ``sample_weight``
        (one per row, e.g. a time decay) multiplies the class weights.
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
        stopping = None
        if X_val is not None and labels_val is not None:
            val = xgb.DMatrix(
                X_val,
                label=labels_val,
                weight=weights[labels_val],
                enable_categorical=True,
            )
            evals = [(val, "validation")]
            stopping = self.early_stopping_rounds
        booster = xgb.train(
            self._booster_params(),
            train,
            num_boost_round=self.n_estimators,
            evals=evals,
            early_stopping_rounds=stopping,
            verbose_eval=False,
        )
        if stopping is not None:
            # Keep only the trees up to the best round, so serving, saving and the
            # plain Booster all predict the same thing with no iteration_range.
            booster = booster[: booster.best_iteration + 1]
        self.booster_ = booster
        self.n_estimators_ = booster.num_boosted_rounds()
        return self

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Return the probability of each class (columns follow ``classes_``)."""
        self._check_fitted("predict_proba")
        X = self._align(X)
        return self._predict_raw(X, len(X))

    def predict_proba_matrix(self, M: np.ndarray) -> np.ndarray:
        """Return the class probabilities of a float32 matrix of category codes.

        ``M`` has the ``feature_names_in_`` columns in order, categorical ones as
        their codes (see :meth:`accepts_codes`). The booster knows which columns
        are categorical, so ``inplace_predict`` on the array gives exactly what the
        DataFrame gives, without pandas' per-call cost.
        """
        self._check_fitted("predict_proba_matrix")
        M = self._check_matrix(M)
        return self._predict_raw(M, len(M))

    def _predict_raw(self, data: Any, n: int) -> np.ndarray:
        booster = self.booster_ if n > SMALL_BATCH else self._single_thread()
        raw = np.asarray(booster.inplace_predict(data, validate_features=False))
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
