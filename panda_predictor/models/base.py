"""Shared contract of the binned resource classifiers: validation, schema, weights, I/O.

Both classifier kinds (:mod:`.xgb`, :mod:`.keras_net`) follow the scikit-learn
estimator contract: ``__init__`` only stores keyword arguments, ``fit`` validates,
learns and returns ``self``, learned state ends in ``_`` and ``predict_proba`` columns
follow ``classes_`` (always ``arange(n_classes)``, even when a class is absent from
the training labels, so every model of a target speaks the same bins).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from panda_predictor.core.errors import check_frame

# NotFittedError is re-exported: ``from panda_predictor.models import NotFittedError``.
from panda_predictor.core.fitted import NotFittedError as NotFittedError
from panda_predictor.core.fitted import check_is_fitted

#: Name of the reserved first category that unseen values are mapped to.
UNKNOWN_CATEGORY = "__unknown__"
#: File that describes a saved model (kind, parameters, schema, learned statistics).
META_FILE = "meta.json"
#: Version of the layout written by ``save``; ``load`` refuses other versions.
FORMAT_VERSION = 1


class ResourceClassifier:
    """Base of the classifiers that predict a resource bin from task features."""

    #: Short name written into ``meta.json`` so :func:`load_classifier` can dispatch.
    kind: ClassVar[str] = ""
    # Constructor parameters every kind has (set by the subclasses' ``__init__``).
    n_classes: int
    class_weight: str | dict[int, float] | None

    # ---- scikit-learn parameter protocol -----------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        """Return the names of the keyword arguments ``__init__`` accepts."""
        sig = inspect.signature(cls.__init__)
        return [name for name in sig.parameters if name != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Return the constructor parameters, as scikit-learn's ``get_params`` does."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> ResourceClassifier:
        """Set constructor parameters; raise for names ``__init__`` does not accept."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(
                    f"The parameter must be one of {valid}. Got {name!r} instead."
                )
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ---- validation ---------------------------------------------------------------
    def _check_n_classes(self) -> int:
        """Return ``n_classes`` after checking it is an integer of at least 2."""
        n = self.n_classes
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
            raise ValueError(
                f"The 'n_classes' parameter must be an integer >= 2. Got {n!r} instead."
            )
        return int(n)

    def _check_fitted(self, method: str) -> None:
        """Raise :class:`NotFittedError` when ``fit`` has not run yet."""
        check_is_fitted(self, "classes_", f"Call 'fit' before '{method}'.")

    def _validate_training(
        self, X: Any, y: Any, name_x: str = "X", name_y: str = "y"
    ) -> tuple[pd.DataFrame, np.ndarray]:
        """Check one (X, y) pair and return X and y as an int64 array."""
        X = check_values(X, name_x)
        return X, self._check_labels(y, len(X), name_y, name_x)

    def _check_labels(
        self, y: Any, n: int, name_y: str, name_x: str, lowest: int = 0
    ) -> np.ndarray:
        """Return ``y`` as n int64 classes in ``lowest..n_classes-1``.

        ``lowest=-1`` admits -1 for "label unknown" (rows fitted with weight 0).
        """
        n_classes = self._check_n_classes()
        labels = np.asarray(y)
        if labels.ndim != 1:
            raise ValueError(
                f"The '{name_y}' argument must be one-dimensional. "
                f"Got shape {labels.shape} instead."
            )
        if len(labels) != n:
            raise ValueError(
                f"The '{name_y}' argument must have one label per row of '{name_x}' "
                f"({n}). Got {len(labels)} labels instead."
            )
        if labels.dtype.kind not in "iuf":
            raise ValueError(
                f"The '{name_y}' argument must contain integer class indices. "
                f"Got dtype {labels.dtype} instead."
            )
        if labels.dtype.kind == "f":
            n_nan = int(np.isnan(labels).sum())
            if n_nan:
                raise ValueError(
                    f"The '{name_y}' argument must not contain NaN labels. "
                    f"Got {n_nan} NaN labels instead."
                )
            fractional = labels[labels != np.round(labels)]
            if fractional.size:
                raise ValueError(
                    f"The '{name_y}' argument must contain integer class indices. "
                    f"Got {float(fractional[0])!r} instead."
                )
        labels = labels.astype(np.int64)
        outside = labels[(labels < lowest) | (labels >= n_classes)]
        if outside.size:
            raise ValueError(
                f"The '{name_y}' argument must contain class indices in "
                f"{lowest}..{n_classes - 1}. Got {int(outside[0])} instead."
            )
        return labels

    def _validate_fit(
        self, X: Any, y: Any, X_val: Any, y_val: Any
    ) -> tuple[pd.DataFrame, np.ndarray, pd.DataFrame | None, np.ndarray | None]:
        """Validate training (and optional validation) data; record the schema."""
        X, labels = self._validate_training(X, y)
        present = np.unique(labels)
        if present.size < 2:
            raise ValueError(
                "The 'y' argument must contain at least two classes. "
                f"Got only class {int(present[0])} instead."
            )
        if (X_val is None) != (y_val is None):
            raise ValueError(
                "The 'X_val' and 'y_val' arguments must be given together. "
                f"Got only {'X_val' if y_val is None else 'y_val'} instead."
            )
        self._record_schema(X)
        X = self._align(X)
        if X_val is None:
            return X, labels, None, None
        X_val, labels_val = self._validate_training(X_val, y_val, "X_val", "y_val")
        return X, labels, self._align(X_val, "X_val"), labels_val

    def _record_schema(self, X: pd.DataFrame) -> None:
        """Remember the classes, columns and category sets serving must match."""
        self.classes_ = np.arange(self._check_n_classes())
        self.feature_names_in_ = np.asarray(X.columns, dtype=object)
        self.n_features_in_ = len(self.feature_names_in_)
        self.categories_ = {
            str(c): list(X[c].cat.categories)
            for c in X.columns
            if isinstance(X[c].dtype, pd.CategoricalDtype)
        }

    def _align(self, X: Any, name: str = "X") -> pd.DataFrame:
        """Return X with the fitted columns, order and category sets.

        Values outside a column's fitted categories become ``__unknown__`` (or
        missing when the column has no such category), so codes always mean the same
        category as at fit time.
        """
        X = check_values(X, name)
        expected = [str(c) for c in self.feature_names_in_]
        if [str(c) for c in X.columns] != expected:
            # Only a frame out of schema order pays for the reordering copy.
            X = check_frame(X, expected)
        columns: dict[str, Any] = {}
        changed = False
        for col in expected:
            series = X[col]
            cats = self.categories_.get(col)
            if cats is None:
                if isinstance(series.dtype, pd.CategoricalDtype):
                    raise ValueError(
                        f"The '{name}' column '{col}' must be numeric, as at fit time. "
                        "Got categorical instead."
                    )
                if series.dtype != np.float32:
                    series = series.astype(np.float32)
                    changed = True
            else:
                if not isinstance(series.dtype, pd.CategoricalDtype):
                    raise ValueError(
                        f"The '{name}' column '{col}' must be categorical, as at fit "
                        f"time. Got {series.dtype} instead."
                    )
                if list(series.cat.categories) != cats:
                    series = recode(series, cats)
                    changed = True
            columns[col] = series
        return pd.DataFrame(columns, index=X.index) if changed else X

    # ---- class weights ------------------------------------------------------------
    def _class_weights(self, labels: np.ndarray) -> np.ndarray:
        """Return one weight per class: balanced, a user mapping, or all ones.

        ``"balanced"`` weights a class by ``n_samples / (n_present * count)`` (the
        scikit-learn rule), so rare bins, such as the high-memory tasks that fail
        when under-predicted, count as much in the loss as the common ones.
        """
        weights = np.ones(self.n_classes, dtype=np.float64)
        counts = np.bincount(labels, minlength=self.n_classes)
        if self.class_weight is None:
            return weights
        if isinstance(self.class_weight, str) and self.class_weight == "balanced":
            present = counts > 0
            weights[present] = len(labels) / (present.sum() * counts[present])
            return weights
        if isinstance(self.class_weight, dict):
            for cls, w in self.class_weight.items():
                weights[int(cls)] = float(w)
            return weights
        raise ValueError(
            "The 'class_weight' parameter must be 'balanced', a dict or None. "
            f"Got {self.class_weight!r} instead."
        )

    @staticmethod
    def _row_weights(sample_weight: Any, n: int) -> np.ndarray:
        """Return ``sample_weight`` as n positive finite weights (None: ones)."""
        if sample_weight is None:
            return np.ones(n)
        weights = np.asarray(sample_weight, dtype=np.float64)
        if weights.shape != (n,) or not np.all(np.isfinite(weights) & (weights > 0)):
            raise ValueError(
                f"The 'sample_weight' field must hold {n} positive finite weights. "
                f"Got shape {weights.shape} instead."
            )
        return weights

    def fit(
        self,
        X: Any,
        y: Any,
        *,
        X_val: Any = None,
        y_val: Any = None,
        sample_weight: Any = None,
        on_step: Callable[[int], None] | None = None,
    ) -> ResourceClassifier:  # pragma: no cover - abstract
        """Learn from features ``X`` and classes ``y``; validate on the given pair.

        ``on_step``, when given, is called with the number of rounds (or epochs)
        done after each one, for a progress display.
        """
        raise NotImplementedError

    # ---- prediction -----------------------------------------------------------------
    def predict_proba(self, X: Any) -> np.ndarray:  # pragma: no cover - abstract
        """Return the probability of each class (columns follow ``classes_``)."""
        raise NotImplementedError

    def predict_proba_matrix(self, M: np.ndarray) -> np.ndarray:  # pragma: no cover
        """Return class probabilities for a float32 code matrix (the fast path)."""
        raise NotImplementedError

    def accepts_codes(
        self, feature_names: Sequence[str], vocabularies: Mapping[str, Sequence[str]]
    ) -> bool:
        """Return whether a code matrix of this schema means what ``fit`` saw.

        True when the model's columns are ``feature_names`` in order and each of its
        categorical columns has exactly the categories ``vocabularies`` gives, so a
        category code is the code the model was trained on.
        """
        self._check_fitted("accepts_codes")
        if [str(c) for c in self.feature_names_in_] != list(feature_names):
            return False
        return set(self.categories_) <= set(vocabularies) and all(
            list(cats) == list(vocabularies[c]) for c, cats in self.categories_.items()
        )

    def _check_matrix(self, M: Any) -> np.ndarray:
        """Return ``M`` as a C-contiguous float32 (n, n_features_in_) matrix."""
        arr = np.ascontiguousarray(M, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] != self.n_features_in_ or len(arr) == 0:
            raise ValueError(
                "The 'M' argument must be a matrix with at least one row and "
                f"{self.n_features_in_} columns. Got shape {arr.shape} instead."
            )
        return arr

    def predict(self, X: Any) -> np.ndarray:
        """Return the most probable class index of each row."""
        self._check_fitted("predict")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    # ---- persistence ----------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:  # pragma: no cover - abstract
        """Write the fitted model into ``directory``."""
        raise NotImplementedError

    @classmethod
    def load(cls, directory: str | Path) -> ResourceClassifier:  # pragma: no cover
        """Return the model saved in ``directory``."""
        raise NotImplementedError

    def _meta(self) -> dict[str, Any]:
        """Return the JSON-able description shared by both kinds."""
        return {
            "kind": self.kind,
            "format_version": FORMAT_VERSION,
            "params": self.get_params(),
            "feature_names": [str(c) for c in self.feature_names_in_],
            "categories": {
                c: [_jsonable(v) for v in cats] for c, cats in self.categories_.items()
            },
        }

    def _restore_meta(self, meta: dict[str, Any]) -> None:
        """Set the learned schema attributes from a saved description."""
        self.classes_ = np.arange(self.n_classes)
        self.feature_names_in_ = np.asarray(meta["feature_names"], dtype=object)
        self.n_features_in_ = len(self.feature_names_in_)
        self.categories_ = {c: list(v) for c, v in meta["categories"].items()}


def check_values(X: Any, name: str = "X") -> pd.DataFrame:
    """Return X if it is a non-empty DataFrame of categorical or numeric columns.

    Checks what the models can compute on, not the schema: ``fit`` learns the schema
    from this frame, and :func:`~panda_predictor.core.errors.check_frame` then holds
    every later frame to it.
    """
    if not isinstance(X, pd.DataFrame):
        raise ValueError(
            f"The '{name}' argument must be a pandas DataFrame. "
            f"Got {type(X).__name__} instead."
        )
    if len(X) == 0 or X.shape[1] == 0:
        raise ValueError(
            f"The '{name}' argument must have at least one row and one column. "
            f"Got shape {X.shape} instead."
        )
    for col, dtype in X.dtypes.items():
        if not (isinstance(dtype, pd.CategoricalDtype) or dtype.kind in "biuf"):
            raise ValueError(
                f"The '{name}' column '{col}' must be categorical or numeric. "
                f"Got {dtype} instead."
            )
    return X


def recode(series: pd.Series, categories: list[Any]) -> pd.Series:
    """Return ``series`` on exactly ``categories``; unseen values become unknown."""
    out = series.cat.set_categories(categories)
    if UNKNOWN_CATEGORY in categories:
        unseen = out.isna() & series.notna()
        if unseen.any():
            out = out.copy()
            out[unseen] = UNKNOWN_CATEGORY
    return out


def write_meta(directory: Path, meta: dict[str, Any]) -> None:
    """Write ``meta.json`` into ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))


def read_meta(directory: Path, kind: str | None = None) -> dict[str, Any]:
    """Read ``meta.json`` and check its version (and kind, when given)."""
    path = Path(directory) / META_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"The model folder must contain {META_FILE}. Got no such file in "
            f"{str(directory)!r} instead."
        )
    meta = json.loads(path.read_text())
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"The saved model's format_version must be {FORMAT_VERSION}. "
            f"Got {meta.get('format_version')!r} instead."
        )
    if kind is not None and meta.get("kind") != kind:
        raise ValueError(
            f"The saved model's kind must be {kind!r}. "
            f"Got {meta.get('kind')!r} instead."
        )
    return meta


def _jsonable(value: Any) -> Any:
    """Turn numpy scalars into plain Python values for JSON."""
    return value.item() if isinstance(value, np.generic) else value
