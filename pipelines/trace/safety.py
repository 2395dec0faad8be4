"""Safety-aware class choice: trade a little accuracy for fewer under-allocations.

The arg-max of a classifier's probabilities is the most likely class; for a resource
request that is not the safest choice, because a job given too small a class fails.
:func:`cumulative_class` instead writes the *smallest class whose cumulative
probability reaches a level* q (q = 0.5 is the median class, q -> 1 the largest
plausible class). :func:`choose_level` picks q on validation jobs only (jobs that
finished before the test month, never the test month itself): among the levels that
keep the goal on those jobs (no baseline better in under- *and* over-allocation at
once, and a macro-F1 above every baseline's), the one that under-allocates least;
if no level keeps the goal, the one beaten by the fewest baselines, then the best
macro-F1. Pure numpy, so it is easy to test and cannot see test data by
construction: it receives only the arrays it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from panda_predictor.core.evaluation import evaluate_target

#: Cumulative-probability levels tried on the validation jobs.
LEVELS: tuple[float, ...] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98)


def cumulative_class(proba: Any, level: float) -> np.ndarray:
    """Return, per row, the smallest class whose cumulative probability >= ``level``.

    :param proba: (n, K) class probabilities, classes ordered by size.
    :param level: the cumulative probability to reach, in (0, 1].
    """
    p = np.asarray(proba, dtype=float)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(
            "The 'proba' field must be an (n, K) array with K >= 2. "
            f"Got shape {p.shape} instead."
        )
    if not 0.0 < level <= 1.0:
        raise ValueError(f"The 'level' field must be in (0, 1]. Got {level!r} instead.")
    cum = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    # A tiny tolerance so rounding never pushes a row past the last class.
    reached = cum >= level - 1e-9
    reached[:, -1] = True
    return np.argmax(reached, axis=1).astype(np.int64)


def allocation(
    classes: Any, y_true: Any, values: Any, actual: Any
) -> tuple[float, float]:
    """Return (under-allocation rate, mean over-allocation) of predicted classes.

    Under-allocation: predicted class below the true one. Over-allocation: mean of
    the predicted class's value minus the used amount, when positive.
    """
    c = np.asarray(classes, dtype=np.int64)
    written = np.asarray(values, dtype=float)[c]
    under = float(np.mean(c < np.asarray(y_true)))
    over = float(np.mean(np.maximum(written - np.asarray(actual, dtype=float), 0.0)))
    return under, over


@dataclass(frozen=True)
class LevelChoice:
    """The chosen level and how it fared on the validation jobs."""

    level: float
    macro_f1: float
    under_allocation: float
    over_allocation: float
    dominated_by: tuple[str, ...]


def choose_level(
    proba_val: Any,
    y_val: Any,
    actual_val: Any,
    values: Any,
    baselines_val: dict[str, Any],
    levels: tuple[float, ...] = LEVELS,
) -> LevelChoice:
    """Pick the cumulative level on validation jobs (see module doc).

    :param proba_val: (n, K) model probabilities of the validation jobs.
    :param y_val: (n,) their true classes.
    :param actual_val: (n,) their used amounts.
    :param values: (K,) the value each class writes.
    :param baselines_val: baseline name -> (n,) its classes for the same jobs.
    :param levels: candidate levels.
    """
    y = np.asarray(y_val, dtype=np.int64)
    k = np.asarray(proba_val).shape[1]
    if y.size == 0:
        raise ValueError("The 'y_val' field must hold at least one job. Got none.")
    points = {
        name: allocation(c, y, values, actual_val) for name, c in baselines_val.items()
    }
    baseline_f1 = max(
        (evaluate_target(y, c, n_classes=k).macro_f1 for c in baselines_val.values()),
        default=0.0,
    )
    choices = []
    for level in levels:
        classes = cumulative_class(proba_val, level)
        under, over = allocation(classes, y, values, actual_val)
        f1 = evaluate_target(y, classes, n_classes=k).macro_f1
        beaten = tuple(
            sorted(n for n, (u, o) in points.items() if u < under and o < over)
        )
        choices.append(LevelChoice(level, f1, under, over, beaten))
    keeping = [c for c in choices if not c.dominated_by and c.macro_f1 > baseline_f1]
    if keeping:
        return min(keeping, key=lambda c: (c.under_allocation, -c.macro_f1))
    return min(choices, key=lambda c: (len(c.dominated_by), -c.macro_f1))
