"""Fit each target's calibrator on the validation part's served distributions.

What is calibrated is what is served: per task the combination's output (the
model's probabilities, or their mix with the followed rule's class, see
:func:`~panda_predictor.core.decide.calibration.served_mixture`). The validation tasks
are replayed in time order, each judged on the records known before it, as
serving judges a new task (:func:`pipelines.training.combination.replay`); without a
combination the model's probabilities are calibrated. The test part is replayed
the same way, after the validation part, for the figures and the metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.assess.calibration_error import (
    cumulative_calibration_error,
    expected_calibration_error,
)
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.calibration import (
    Calibrator,
    fit_calibrator,
    served_mixture,
)
from panda_predictor.core.decide.experts import CombinationParams
from pipelines.training.combination import replay


@dataclass
class ServedParts:
    """One target's served distributions before calibration, with the true classes.

    ``val`` / ``test`` (n x K) on the validation and test parts, ``y_val`` /
    ``y_test`` their classes (-1: unknown), ``followed_val`` / ``followed_test``
    the expert each task followed (0: the model; empty without combination).
    """

    val: np.ndarray
    y_val: np.ndarray
    test: np.ndarray
    y_test: np.ndarray
    followed_val: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    followed_test: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def union_rows(val: np.ndarray, test: np.ndarray) -> np.ndarray:
    """Return the validation and test row positions together, sorted."""
    return np.union1d(val, test)


def served_parts(
    params: CombinationParams | None,
    rules: Mapping[str, Any],
    proba: Mapping[str, np.ndarray],
    X: pd.DataFrame,
    frame: pd.DataFrame,
    y: Mapping[str, np.ndarray],
    bins: BinSet,
    val: np.ndarray,
    test: np.ndarray,
) -> dict[str, ServedParts]:
    """Return every target's served distributions on the validation and test rows.

    The validation rows are replayed alone (the combination's record starts at
    them, as the bundle's ``record_start`` says, so the first has no record, as
    in serving); the test rows are replayed after them, with the validation tasks
    in their record.

    Parameters: ``params`` the chosen combination (None: the model alone);
    ``rules`` the tail rules per target; ``proba`` the served models'
    probabilities on :func:`union_rows` of ``val`` and ``test``; ``X`` the
    features and ``frame`` the labelled history of all rows; ``y`` the classes of
    all rows; ``val``, ``test`` row positions.
    """
    both = union_rows(val, test)
    at_val, at_test = np.searchsorted(both, val), np.searchsorted(both, test)
    val_proba = {t: p[at_val] for t, p in proba.items()}
    if params is None:
        return {
            t: ServedParts(val_proba[t], y[t][val], p[at_test], y[t][test])
            for t, p in proba.items()
        }
    everything = np.arange(len(val))
    mixed_val = _mixed(params, rules, val_proba, X, frame, y, bins, val, everything)
    mixed_test = _mixed(params, rules, proba, X, frame, y, bins, both, at_test)
    return {
        t: ServedParts(
            mixed_val[t][0],
            y[t][val],
            mixed_test[t][0],
            y[t][test],
            mixed_val[t][1],
            mixed_test[t][1],
        )
        for t in proba
    }


def _mixed(
    params: CombinationParams,
    rules: Mapping[str, Any],
    proba: Mapping[str, np.ndarray],
    X: pd.DataFrame,
    frame: pd.DataFrame,
    y: Mapping[str, np.ndarray],
    bins: BinSet,
    rows: np.ndarray,
    keep: np.ndarray,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Return the served mixtures and followed experts of the replay over ``rows``,
    at positions ``keep``."""
    answers = replay(
        params,
        rules,
        proba,
        X.iloc[rows],
        frame.iloc[rows],
        {t: y[t][rows] for t in proba},
        bins,
    )
    return {
        t: (
            served_mixture(p, a.classes, a.leader, a.confidence)[keep],
            a.leader[keep],
        )
        for (t, p), a in zip(proba.items(), answers.values(), strict=True)
    }


def fit_calibrators(
    parts: Mapping[str, ServedParts], method: str
) -> dict[str, Calibrator]:
    """Return each target's calibrator of ``method`` fitted on its validation part."""
    return {
        t: fit_calibrator(p.val, p.y_val, method, p.followed_val)
        for t, p in parts.items()
    }


def calibration_metrics(
    parts: Mapping[str, ServedParts], calibrators: Mapping[str, Calibrator]
) -> dict[str, float]:
    """Return the test part's ECE per target, calibrated and not.

    Names: ``<target>.ece`` and ``<target>.ece_uncalibrated`` (top-label), and
    ``<target>.cumulative_ece`` / ``..._uncalibrated`` (P(y <= k) pooled over k).
    """
    out = {}
    for target, p in parts.items():
        known = p.y_test >= 0
        if not known.any():
            continue
        raw, y = p.test[known], p.y_test[known]
        followed = p.followed_test[known] if len(p.followed_test) else None
        calibrated = calibrators[target].transform(raw, followed)
        out[f"{target}.ece"] = expected_calibration_error(calibrated, y)
        out[f"{target}.ece_uncalibrated"] = expected_calibration_error(raw, y)
        out[f"{target}.cumulative_ece"] = cumulative_calibration_error(calibrated, y)
        out[f"{target}.cumulative_ece_uncalibrated"] = cumulative_calibration_error(
            raw, y
        )
    return out
