"""How far stated probabilities are from observed frequencies.

:func:`expected_calibration_error` (top-label ECE, Guo et al. 2017),
:func:`cumulative_calibration_error` (ECE of P(y <= k) pooled over k, the event the
product's confidence states) and :func:`reliability_table` for the figures. They
judge the calibrators of :mod:`panda_predictor.core.decide.calibration` (training
compares its methods by them) and the served distributions.

Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from panda_predictor.core.decide.calibration import check_labels
from panda_predictor.core.decide.tail_rule import _check_proba


def _binned_gap(conf: np.ndarray, hit: np.ndarray, n_bins: int) -> float:
    """Return sum over equal-width bins of |mean hit - mean conf| * share."""
    if conf.size == 0:
        return float("nan")
    table = _bins(conf, hit, n_bins)
    gaps = np.abs(table.accuracy - table.confidence)
    return float(np.sum(np.where(table.n > 0, table.count * gaps, 0.0)))


@dataclass(frozen=True)
class ReliabilityTable:
    """Equal-width confidence bins: bounds, tasks, mean confidence and hit rate.

    ``count`` is the share of the rows in the bin; accuracy and confidence are NaN
    in an empty bin.
    """

    lower: np.ndarray
    upper: np.ndarray
    count: np.ndarray
    n: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray

    def to_dict(self) -> dict[str, list[float | None]]:
        """Return the columns as lists (NaN as None), JSON-ready."""
        return {
            f: [None if np.isnan(v) else float(v) for v in getattr(self, f)]
            for f in ("lower", "upper", "count", "n", "confidence", "accuracy")
        }


def bin_of(conf: np.ndarray, n_bins: int) -> np.ndarray:
    """Return each confidence's equal-width bin, 0 .. ``n_bins - 1``.

    Right-closed bins, (a, b], with 0 in the first: Guo et al.'s convention.
    """
    if n_bins < 1:
        raise ValueError(f"The 'n_bins' field must be >= 1. Got {n_bins!r} instead.")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, n_bins - 1)


def top_label(proba: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return each row's top-label confidence and whether that class was right."""
    p = _check_proba(proba)
    labels = check_labels(y, p.shape[0], p.shape[1])
    return p.max(axis=1), np.argmax(p, axis=1) == labels


def _bins(conf: np.ndarray, hit: np.ndarray, n_bins: int) -> ReliabilityTable:
    which = bin_of(conf, n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    n = np.bincount(which, minlength=n_bins).astype(np.float64)
    conf_sum = np.bincount(which, weights=conf, minlength=n_bins)
    hit_sum = np.bincount(which, weights=hit.astype(np.float64), minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.where(n > 0, conf_sum / n, np.nan)
        accuracy = np.where(n > 0, hit_sum / n, np.nan)
    share = n / max(conf.size, 1)
    table = ReliabilityTable(edges[:-1], edges[1:], share, n, mean_conf, accuracy)
    return table


def _cumulative(proba: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    p = _check_proba(proba)
    labels = check_labels(y, p.shape[0], p.shape[1])
    cum = np.clip(np.cumsum(p, axis=1)[:, :-1], 0.0, 1.0)
    hit = labels[:, None] <= np.arange(p.shape[1] - 1)[None, :]
    return cum.ravel(), hit.ravel()


def expected_calibration_error(proba: Any, y: Any, n_bins: int = 15) -> float:
    """Return the top-label ECE: confidence of the most likely class vs its hit rate.

    Guo et al. (2017): the rows are binned by their largest probability into
    ``n_bins`` equal-width bins; the ECE is the share-weighted mean gap between
    each bin's mean confidence and its accuracy. NaN for no rows.
    """
    conf, hit = top_label(proba, y)
    return _binned_gap(conf, hit, n_bins)


def cumulative_calibration_error(proba: Any, y: Any, n_bins: int = 15) -> float:
    """Return the ECE of P(y <= k), pooled over k = 0..K-2.

    The product's confidence is P(true class <= written class): this measures
    whether such cumulative probabilities are right as often as they say.
    """
    conf, hit = _cumulative(proba, y)
    return _binned_gap(conf, hit, n_bins)


def reliability_table(
    proba: Any, y: Any, n_bins: int = 15, kind: str = "top"
) -> ReliabilityTable:
    """Return the bins of a reliability diagram, ``kind`` 'top' or 'cumulative'."""
    if kind not in ("top", "cumulative"):
        raise ValueError(
            f"The 'kind' field must be 'top' or 'cumulative'. Got {kind!r} instead."
        )
    conf, hit = top_label(proba, y) if kind == "top" else _cumulative(proba, y)
    return _bins(conf, hit, n_bins)
