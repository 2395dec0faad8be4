"""The errors of the estimators (features, models, decision rules) and the schema check.

One :func:`check_frame` that every estimator runs on a feature frame against its
learned schema, so a schema mismatch reads the same everywhere. The "used before
``fit``" contract lives in :mod:`panda_predictor.core.fitted`; its
:class:`NotFittedError` is re-exported here, where callers have long imported it.
Pure: pandas only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from panda_predictor.core.fitted import NotFittedError as NotFittedError


class FeatureSchemaError(ValueError):
    """Raised when a feature frame's columns differ from the pipeline's schema."""

    def __init__(
        self, message: str, missing: Sequence[str] = (), unexpected: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.missing = list(missing)
        self.unexpected = list(unexpected)


def check_frame(X: Any, feature_names: Sequence[str]) -> pd.DataFrame:
    """Return ``X`` with its columns in schema order; raise if the column sets differ.

    Parameters: ``X`` is a feature frame; ``feature_names`` the expected columns.
    Raises :class:`FeatureSchemaError` naming the missing and the unexpected columns.
    """
    if not isinstance(X, pd.DataFrame):
        raise FeatureSchemaError(
            f"The features must be a pandas DataFrame. Got {type(X).__name__} instead."
        )
    expected = list(feature_names)
    known = set(expected)
    missing = [c for c in expected if c not in X.columns]
    unexpected = [str(c) for c in X.columns if c not in known]
    if missing or unexpected:
        raise FeatureSchemaError(
            f"The feature frame must have the {len(expected)} columns of the schema. "
            f"Got one with missing columns {missing} and unexpected columns "
            f"{unexpected} instead.",
            missing,
            unexpected,
        )
    return X[expected]
