"""How sure is a macro-F1 lead, or an ECE? A bootstrap over test *days*.

Jobs of one day are not independent (a user's burst fills a day with near-copies),
so resampling single jobs would make every small lead look certain. The bootstrap
here resamples whole days with replacement, scores the model row and the best
baseline on the same resampled days (paired), and reports the 5th-95th percentile
of the macro-F1 difference. Each day is reduced to one confusion matrix per
predictor first, so a thousand resamples cost a few milliseconds.

The same resampling gives the calibration goal's figure an interval
(:func:`ece_interval`): whether a log's ECE above 0.05 is a clear miss or within
what its test days' luck moves it, on
:class:`~panda_predictor.core.assess.day_bootstrap.DayBootstrap`'s draws.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from panda_predictor.core.assess.calibration_error import (
    bin_of,
    expected_calibration_error,
    top_label,
)
from panda_predictor.core.assess.day_bootstrap import DayBootstrap

#: Resamples per interval.
N_RESAMPLES = 1000


@dataclass(frozen=True)
class MarginInterval:
    """The macro-F1 lead of a model row over a baseline, with a 90 % interval."""

    model: str
    baseline: str
    margin: float
    low: float
    high: float
    n_days: int

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dict."""
        return asdict(self)

    def describe(self) -> str:
        """Return one line for the report."""
        sure = "lead holds" if self.low > 0 else "lead not sure"
        return (
            f"macro-F1 lead of {self.model} over {self.baseline}: "
            f"{self.margin:+.3f} (90 % interval over {self.n_days} resampled days: "
            f"{self.low:+.3f} to {self.high:+.3f}; {sure})"
        )


def _macro_f1(cm: np.ndarray) -> np.ndarray:
    """Return macro-F1 of a stack of confusion matrices (..., K, K), rows = truth.

    Classes absent from both truth and prediction are left out of the mean, as in
    :func:`panda_predictor.core.assess.evaluation.evaluate_target`.
    """
    tp = np.diagonal(cm, axis1=-2, axis2=-1)
    denom = cm.sum(axis=-1) + cm.sum(axis=-2)
    present = denom > 0
    f1 = np.divide(2.0 * tp, denom, out=np.zeros(tp.shape), where=present)
    return f1.sum(axis=-1) / np.maximum(present.sum(axis=-1), 1)


def _daily_matrices(
    day_index: np.ndarray, n_days: int, y: np.ndarray, pred: np.ndarray, k: int
) -> np.ndarray:
    """Return one (K, K) confusion matrix per day, shape (n_days, K, K)."""
    flat = (day_index * k + y) * k + pred
    return np.bincount(flat, minlength=n_days * k * k).reshape(n_days, k, k)


def margin_interval(
    days: Any,
    y_true: Any,
    model_classes: Any,
    baseline_classes: Any,
    n_classes: int,
    names: tuple[str, str] = ("model", "baseline"),
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> MarginInterval:
    """Return the macro-F1 lead of the model over the baseline and its interval.

    :param days: (n,) day of each test job (any hashable labels).
    :param y_true: (n,) true classes.
    :param model_classes: (n,) the model row's classes.
    :param baseline_classes: (n,) the baseline's classes.
    :param n_classes: number of classes K.
    :param names: (model name, baseline name) for the report.
    """
    y = np.asarray(y_true, dtype=np.int64)
    if y.size == 0:
        raise ValueError("The 'y_true' field must hold at least one job. Got none.")
    _, day_index = np.unique(np.asarray(days), return_inverse=True)
    n_days = int(day_index.max()) + 1
    model_cm = _daily_matrices(
        day_index, n_days, y, np.asarray(model_classes, dtype=np.int64), n_classes
    )
    base_cm = _daily_matrices(
        day_index, n_days, y, np.asarray(baseline_classes, dtype=np.int64), n_classes
    )
    margin = float(_macro_f1(model_cm.sum(0)) - _macro_f1(base_cm.sum(0)))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_days, size=(n_resamples, n_days))
    counts = np.stack([np.bincount(p, minlength=n_days) for p in picks])
    diffs = _macro_f1(np.einsum("rd,dij->rij", counts, model_cm)) - _macro_f1(
        np.einsum("rd,dij->rij", counts, base_cm)
    )
    low, high = np.quantile(diffs, [0.05, 0.95])
    return MarginInterval(names[0], names[1], margin, float(low), float(high), n_days)


@dataclass(frozen=True)
class EceInterval:
    """A test part's top-label ECE with the 90 % interval over resampled days."""

    ece: float
    low: float
    high: float
    n_days: int


def ece_interval(
    days: Any,
    proba: Any,
    y_true: Any,
    n_bins: int = 15,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> EceInterval:
    """Return the top-label ECE of ``proba`` against ``y_true`` and its interval.

    The ECE is :func:`~panda_predictor.core.assess.calibration_error.
    expected_calibration_error`'s, written as ``sum over bins |hits - confidences|
    / rows``: each bin's term is a ratio of sums over rows, which
    :class:`~panda_predictor.core.assess.day_bootstrap.DayBootstrap` recomputes on
    every resample of whole days. The interval is the 5th-95th percentile. A
    binned ECE of finite data sits above the true calibration error (each bin's
    noise adds to it), so the interval tells how far the test days move the
    figure, not that the model is calibrated within it.

    :param days: (n,) day of each test row (any hashable labels).
    :param proba: (n, K) the served class probabilities.
    :param y_true: (n,) true classes.
    """
    conf, hit = top_label(proba, y_true)
    if conf.size == 0:
        raise ValueError("The 'y_true' field must hold at least one row. Got none.")
    boot = DayBootstrap(days, n_resamples, seed)
    which, gap, rows = bin_of(conf, n_bins), hit - conf, np.ones(conf.size)
    terms = [np.where(which == b, gap, 0.0) for b in np.unique(which)]
    resampled = sum(np.abs(boot.resampled(t, rows)) for t in terms)
    low, high = np.quantile(resampled, [0.05, 0.95])
    ece = expected_calibration_error(proba, y_true, n_bins)
    return EceInterval(ece, float(low), float(high), boot.n_days)
