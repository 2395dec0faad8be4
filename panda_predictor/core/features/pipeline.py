"""Turn a task (one JEDI_TASKS row plus dataset counts) into the model's features.

Everything used is known when the task is submitted: the task's own fields
(:mod:`panda_predictor.core.features.task_features`) and the recent history of similar
tasks whose labels were known *before* the task was created (see
:mod:`panda_predictor.core.features.history`). The full list and the leakage rule are in
``docs/features.md``.

:class:`FeaturePipeline` follows the scikit-learn estimator contract: it learns the
categorical vocabularies and the output schema in ``fit`` and is stored with the model
(:meth:`FeaturePipeline.to_dict`), so a model always sees the columns it was trained on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.errors import FeatureSchemaError, check_frame
from panda_predictor.core.features.history import (
    HISTORY_GROUPS,
    HistoryStatistics,
    RecentHistoryIndex,
    history_feature_names,
    history_features_at_creation,
    split_transhome_value,
    text_value,
)
from panda_predictor.core.features.matrix_columns import MatrixColumns
from panda_predictor.core.features.task_features import (
    CATEGORICAL_FEATURES,
    TASK_COLUMNS,
    TASK_NUMERIC_FEATURES,
    record_numeric_features,
    task_features,
)
from panda_predictor.core.fitted import NotFittedError, check_is_fitted
from panda_predictor.core.identity_cache import cached_by_identity

__all__ = [
    "CATEGORICAL_FEATURES",
    "FEATURE_PIPELINE_VERSION",
    "TASK_COLUMNS",
    "TASK_NUMERIC_FEATURES",
    "UNKNOWN",
    "FeaturePipeline",
    "FeatureSchemaError",
    "NotFittedError",
    "check_frame",
]

#: Bumped whenever a feature is computed differently; stored pipelines must match it.
#: 2: request columns, creation hour/weekday, the user_transformation key and the
#: percentile and ratio statistics of the recent history.
FEATURE_PIPELINE_VERSION = "2"
#: The explicit bucket for NULL, rare and unseen categorical values (category 0).
UNKNOWN = "__unknown__"


class FeaturePipeline:
    """Learn categorical vocabularies and a fixed schema; turn tasks into features.

    Parameters: ``min_count`` is how often a categorical value must appear in training
    to get its own category (rarer ones join ``"__unknown__"``); ``max_categories``
    caps each vocabulary to its most frequent values (None = no cap);
    ``history_groups`` and ``targets`` choose the recent-history features.
    """

    version = FEATURE_PIPELINE_VERSION

    def __init__(
        self,
        *,
        min_count: int = 5,
        max_categories: int | None = None,
        history_groups: Sequence[str] = tuple(HISTORY_GROUPS),
        targets: Sequence[str] = TARGET_NAMES,
    ) -> None:
        self.min_count = min_count
        self.max_categories = max_categories
        self.history_groups = history_groups
        self.targets = targets

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Return the constructor parameters (scikit-learn's contract)."""
        return {
            "min_count": self.min_count,
            "max_categories": self.max_categories,
            "history_groups": self.history_groups,
            "targets": self.targets,
        }

    def set_params(self, **params: Any) -> FeaturePipeline:
        """Set constructor parameters and return ``self`` (scikit-learn's contract)."""
        for key, value in params.items():
            if key not in self.get_params():
                raise ValueError(
                    f"The parameter must be one of {list(self.get_params())}. "
                    f"Got {key!r} instead."
                )
            setattr(self, key, value)
        return self

    def _validate_params(self) -> None:
        if (
            isinstance(self.min_count, bool)
            or not isinstance(self.min_count, int)
            or (self.min_count < 1)
        ):
            raise ValueError(
                "The 'min_count' field must be a positive integer. "
                f"Got {self.min_count!r} instead."
            )
        mc = self.max_categories
        if mc is not None and (
            isinstance(mc, bool) or not isinstance(mc, int) or mc < 1
        ):
            raise ValueError(
                "The 'max_categories' field must be a positive integer or None. "
                f"Got {mc!r} instead."
            )
        for field, value, allowed in (
            ("history_groups", self.history_groups, list(HISTORY_GROUPS)),
            ("targets", self.targets, list(TARGET_NAMES)),
        ):
            if isinstance(value, str) or not set(value) <= set(allowed):
                raise ValueError(
                    f"The '{field}' field must be a list drawn from {allowed}. "
                    f"Got {value!r} instead."
                )

    @staticmethod
    def _check_tasks(tasks: Any) -> None:
        if not isinstance(tasks, pd.DataFrame):
            raise TypeError(
                "The 'tasks' field must be a pandas DataFrame. "
                f"Got {type(tasks).__name__} instead."
            )
        missing = [c for c in TASK_COLUMNS if c not in tasks.columns]
        if missing:
            raise ValueError(
                f"The 'tasks' frame must have the columns {list(TASK_COLUMNS)}. "
                f"Got one without {missing} instead."
            )

    def fit(self, tasks: pd.DataFrame, history: Any = None) -> FeaturePipeline:
        """Learn the vocabularies and the output schema from ``tasks``; return self.

        ``history`` is accepted for symmetry with :meth:`transform`; nothing is learned
        from it.
        """
        self._validate_params()
        self._check_tasks(tasks)
        if len(tasks) == 0:
            raise ValueError(
                "The 'tasks' frame must have at least one row to fit on. Got 0 instead."
            )
        raw = task_features(tasks)
        vocabularies: dict[str, list[str]] = {}
        for name in CATEGORICAL_FEATURES:
            counts = raw[name].value_counts(dropna=True)
            counts = counts[(counts >= self.min_count) & (counts.index != UNKNOWN)]
            # Most frequent first, ties by name, so the cap is deterministic.
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            if self.max_categories is not None:
                ranked = ranked[: self.max_categories - 1]
            vocabularies[name] = [UNKNOWN] + sorted(str(v) for v, _ in ranked)
        self._set_schema(vocabularies)
        return self

    def _set_schema(self, vocabularies: dict[str, list[str]]) -> None:
        self.vocabularies_ = vocabularies
        self.feature_names_in_ = list(TASK_COLUMNS)
        self.categorical_features_ = list(CATEGORICAL_FEATURES)
        self.numeric_features_ = list(TASK_NUMERIC_FEATURES) + history_feature_names(
            self.history_groups, self.targets
        )
        self.feature_names_out_ = self.categorical_features_ + self.numeric_features_
        self.dtypes_ = {
            name: pd.CategoricalDtype(vocabularies[name])
            for name in CATEGORICAL_FEATURES
        }
        self.schema_hash_ = self._schema_hash()

    def _schema_hash(self) -> str:
        schema = {
            "version": self.version,
            "features": self.feature_names_out_,
            "categorical": self.categorical_features_,
            "vocabularies": self.vocabularies_,
        }
        blob = json.dumps(schema, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def _check_fitted(self) -> None:
        """Raise :class:`NotFittedError` before ``fit`` or ``from_dict`` has run."""
        check_is_fitted(
            self,
            "schema_hash_",
            "Call 'fit' with training tasks (or load a fitted one with 'from_dict') "
            "before using it.",
        )

    def transform(self, tasks: pd.DataFrame, history: Any = None) -> pd.DataFrame:
        """Return the features of ``tasks`` (index aligned) in the learned schema.

        ``history`` is None (history features NaN), a labelled history frame (each task
        sees what was known before its ``creationdate``: the training path), that
        frame's :meth:`statistics` (the same features; built once for several
        calls) or a :class:`RecentHistoryIndex` (everything known before its
        ``as_of``: serving).
        """
        self._check_fitted()
        self._check_tasks(tasks)
        raw = task_features(tasks)
        columns: dict[str, Any] = {}
        for name in self.categorical_features_:
            dtype = self.dtypes_[name]
            codes = dtype.categories.get_indexer(raw[name].to_numpy(dtype=object))
            # NULL and unseen values give -1: send them to category 0, "__unknown__".
            columns[name] = pd.Categorical.from_codes(np.maximum(codes, 0), dtype=dtype)
        for name in TASK_NUMERIC_FEATURES:
            columns[name] = raw[name].to_numpy(dtype=np.float32)
        hist_names = history_feature_names(self.history_groups, self.targets)
        if hist_names:
            hist = self._history_features(tasks, history, hist_names)
            for name in hist_names:
                columns[name] = hist[name].to_numpy(dtype=np.float32)
        return pd.DataFrame(columns, index=tasks.index)[self.feature_names_out_]

    def transform_records(
        self, records: Sequence[Mapping[str, Any]], history: Any = None
    ) -> np.ndarray:
        """Return the features of task records as a float32 matrix (the fast path).

        Each record maps the :data:`TASK_COLUMNS` to values (one task, as the HTTP
        service and the JEDI plugin see it). Columns follow ``feature_names_out_``;
        a categorical feature holds its category code (0 = ``"__unknown__"``). The
        values equal :meth:`to_matrix` of :meth:`transform` on the same tasks, but
        one task costs tens of microseconds instead of milliseconds of pandas.
        ``history`` is as in :meth:`transform` (a labelled history frame takes the
        DataFrame path).
        """
        self._check_fitted()
        records = self._check_records(records)
        if isinstance(history, pd.DataFrame):
            return self.to_matrix(self.transform(pd.DataFrame(records), history))
        n = len(records)
        out = np.empty((n, len(self.feature_names_out_)), dtype=np.float32)
        codes = self._code_maps()
        for i, record in enumerate(records):
            framework, release = split_transhome_value(record["transhome"])
            for j, name in enumerate(self.categorical_features_):
                if name == "framework":
                    value = framework
                elif name == "release":
                    value = release
                else:
                    value = text_value(record[name])
                out[i, j] = codes[name].get(value, 0)  # type: ignore[arg-type]
        start = len(self.categorical_features_)
        stop = start + len(TASK_NUMERIC_FEATURES)
        out[:, start:stop] = record_numeric_features(records)
        start = stop
        if start < out.shape[1]:
            out[:, start:] = self._history_rows(records, history)
        return out

    def _history_rows(
        self, records: list[Mapping[str, Any]], history: Any
    ) -> np.ndarray:
        """Return the history features of ``records`` in the pipeline's order."""
        if history is None:
            width = len(self.numeric_features_) - len(TASK_NUMERIC_FEATURES)
            return np.full((len(records), width), np.nan)
        if isinstance(history, RecentHistoryIndex):
            rows = history.lookup_rows(records)
            columns = self._history_columns(history)
            return rows if columns is None else rows[:, columns]
        raise TypeError(
            "The 'history' field must be None, a DataFrame or a RecentHistoryIndex. "
            f"Got {type(history).__name__} instead."
        )

    def _history_columns(self, history: RecentHistoryIndex) -> list[int] | None:
        """Return where the history features lie in ``history``'s rows (None: in
        order), kept for the last index seen (the service asks one index per task).
        """
        schema = self.numeric_features_

        def columns() -> list[int] | None:
            names = schema[len(TASK_NUMERIC_FEATURES) :]
            position = {n: i for i, n in enumerate(history.feature_names)}
            missing = [n for n in names if n not in position]
            if missing:
                raise FeatureSchemaError(
                    "The history index must cover the pipeline's history features. "
                    f"Got one without {missing} instead.",
                    missing=missing,
                )
            found = [position[n] for n in names]
            return None if found == list(range(len(position))) else found

        return cached_by_identity(
            self, "_history_columns_cache", (history, schema), columns
        )

    @staticmethod
    def _check_records(records: Any) -> list[Mapping[str, Any]]:
        if isinstance(records, Mapping | str | pd.DataFrame) or not isinstance(
            records, Sequence
        ):
            raise TypeError(
                "The 'records' field must be a list of column -> value maps. "
                f"Got {type(records).__name__} instead."
            )
        for i, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise TypeError(
                    f"The 'records' field must hold column -> value maps. Got "
                    f"{type(record).__name__} at position {i} instead."
                )
            missing = [c for c in TASK_COLUMNS if c not in record]
            if missing:
                raise ValueError(
                    f"Each task record must have the keys {list(TASK_COLUMNS)}. "
                    f"Got record {i} without {missing} instead."
                )
        return list(records)

    def _code_maps(self) -> dict[str, dict[str, int]]:
        """Return value -> category code per categorical feature (built once)."""
        vocabularies = self.vocabularies_
        return cached_by_identity(
            self,
            "_codes_cache",
            (vocabularies,),
            lambda: {
                name: {v: i for i, v in enumerate(vocabularies[name])}
                for name in self.categorical_features_
            },
        )

    def to_matrix(self, X: pd.DataFrame) -> np.ndarray:
        """Return a feature frame as the float32 matrix of :meth:`transform_records`.

        Categorical columns become their category codes (NULL -> 0); the frame
        must be in the learned schema (see :meth:`check_frame`).
        """
        X = self.check_frame(X)
        out = np.empty((len(X), len(self.feature_names_out_)), dtype=np.float32)
        for j, name in enumerate(self.feature_names_out_):
            column = X[name]
            if name in self.dtypes_:
                out[:, j] = np.maximum(column.cat.codes.to_numpy(), 0)
            else:
                out[:, j] = column.to_numpy(dtype=np.float32, na_value=np.nan)
        return out

    def matrix_columns(self, M: np.ndarray) -> MatrixColumns:
        """Return the columns of a :meth:`transform_records` matrix by feature name.

        What a rule reads from a few columns (the experts, the requests) without
        the cost of a feature frame.
        """
        self._check_fitted()
        names = self.feature_names_out_
        positions = cached_by_identity(
            self,
            "_positions_cache",
            (names,),
            lambda: {n: j for j, n in enumerate(names)},
        )
        return MatrixColumns(M, positions)

    def frame_from_matrix(self, M: np.ndarray, index: Any = None) -> pd.DataFrame:
        """Return the feature frame of a :meth:`transform_records` matrix.

        The inverse of :meth:`to_matrix`: codes become the learned categories again.
        Used where a frame is needed after the fast path (e.g. explanations).
        """
        self._check_fitted()
        columns: dict[str, Any] = {}
        for j, name in enumerate(self.feature_names_out_):
            if name in self.dtypes_:
                codes = M[:, j].astype(np.int64)
                columns[name] = pd.Categorical.from_codes(
                    codes, dtype=self.dtypes_[name]
                )
            else:
                columns[name] = M[:, j]
        return pd.DataFrame(columns, index=index)

    def _history_features(
        self, tasks: pd.DataFrame, history: Any, names: list[str]
    ) -> pd.DataFrame:
        if history is None:
            return pd.DataFrame(np.nan, index=tasks.index, columns=names)
        if isinstance(history, RecentHistoryIndex):
            return self._covered(history, names).features(tasks)
        if isinstance(history, pd.DataFrame):
            return history_features_at_creation(
                tasks, history, tuple(self.history_groups), tuple(self.targets)
            )
        if isinstance(history, HistoryStatistics):
            return self._covered(history, names).at_creation(tasks)[names]
        raise TypeError(
            "The 'history' field must be None, a DataFrame, a HistoryStatistics or "
            f"a RecentHistoryIndex. Got {type(history).__name__} instead."
        )

    @staticmethod
    def _covered(history: Any, names: list[str]) -> Any:
        """Return ``history`` (an index or statistics) if it has every feature
        of ``names``; raise :class:`FeatureSchemaError` naming the missing ones."""
        missing = [n for n in names if n not in history.feature_names]
        if missing:
            raise FeatureSchemaError(
                "The history must cover the pipeline's history features. "
                f"Got {type(history).__name__} without {missing} instead.",
                missing=missing,
            )
        return history

    def statistics(self, history: pd.DataFrame) -> HistoryStatistics:
        """Return the running statistics of a labelled ``history`` frame for this
        pipeline's key groups and targets, to pass to :meth:`transform` as its
        ``history`` several times (built once: see :class:`HistoryStatistics`)."""
        return HistoryStatistics(
            history, tuple(self.history_groups), tuple(self.targets)
        )

    def fit_transform(self, tasks: pd.DataFrame, history: Any = None) -> pd.DataFrame:
        """Fit on ``tasks`` and return their features."""
        return self.fit(tasks, history).transform(tasks, history)

    def check_frame(self, X: Any) -> pd.DataFrame:
        """Return ``X`` in schema order; raise :class:`FeatureSchemaError` if not.

        Besides the column names, each categorical column must carry the learned
        categories (their codes are what a model was trained on).
        """
        self._check_fitted()
        X = check_frame(X, self.feature_names_out_)
        for name in self.categorical_features_:
            if X[name].dtype != self.dtypes_[name]:
                raise FeatureSchemaError(
                    f"The '{name}' feature must be categorical with the pipeline's "
                    f"{len(self.vocabularies_[name])} learned categories. "
                    f"Got dtype {X[name].dtype} instead."
                )
        return X

    def to_dict(self) -> dict[str, Any]:
        """Return the fitted pipeline as a JSON-serialisable dict (see from_dict)."""
        self._check_fitted()
        return {
            "class": type(self).__name__,
            "version": self.version,
            "params": {
                "min_count": self.min_count,
                "max_categories": self.max_categories,
                "history_groups": list(self.history_groups),
                "targets": list(self.targets),
            },
            "vocabularies": {k: list(v) for k, v in self.vocabularies_.items()},
            "feature_names_out": list(self.feature_names_out_),
            "schema_hash": self.schema_hash_,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FeaturePipeline:
        """Rebuild a fitted pipeline from :meth:`to_dict`; refuse other versions."""
        version = data.get("version") if isinstance(data, dict) else None
        if version != FEATURE_PIPELINE_VERSION:
            raise ValueError(
                f"The 'version' field must be {FEATURE_PIPELINE_VERSION!r} (this "
                f"code's feature pipeline). Got {version!r} instead."
            )
        pipeline = cls(**data["params"])
        pipeline._validate_params()
        pipeline._set_schema({k: list(v) for k, v in data["vocabularies"].items()})
        if pipeline.schema_hash_ != data["schema_hash"]:
            raise ValueError(
                f"The 'schema_hash' field must match the stored schema "
                f"({pipeline.schema_hash_}). Got {data['schema_hash']!r} instead."
            )
        return pipeline
