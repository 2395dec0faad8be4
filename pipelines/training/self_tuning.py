"""Choose the training window and the retraining cadence from the deployment's own past.

Constants tuned on our development logs do not travel: a grid site's jobs change
within days, a cluster's over months. So each retraining answers two questions on
its own history, with the time-ordered validation part (the newest tasks, which
the trees did not fit on) as a small walk forward nested inside it:

* **How much of the past to trust** (the training window). Every finished task is
  used, weighted by a time decay that halves every *half-life* days. Each candidate
  half-life (:data:`HALF_LIFE_CANDIDATES`; ``None`` is "all history, equal
  weights") fits the target's model once; the best validation macro-F1 wins, and a
  near tie goes to the longer half-life (more data, steadier).
* **How often to retrain** (the cadence). The served models' accuracy on the
  validation tasks is regressed on each task's age (days since the newest
  training task). A cadence of ``c`` days serves, on average, a model ``c / 2``
  days old, so it costs about ``loss_per_day * c / 2`` accuracy points. The
  longest candidate (:data:`CADENCE_CANDIDATES_DAYS`) whose cost stays within
  :data:`CADENCE_TOLERANCE` is chosen. The loss is the one-sided 90 % lower bound
  of the fitted decay, so noise alone never buys a shorter (dearer) cadence, and a
  cadence that would retrain on fewer than :data:`MIN_TASKS_PER_RETRAIN` new tasks
  is not chosen (the model would barely change).

Pure functions of arrays: :func:`pipelines.training.train.train` calls them and
records the choice in the bundle; the benchmark's walk forward retrains on the chosen
cadence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: Half-lives (days) a retraining tries; None weighs all finished history equally.
HALF_LIFE_CANDIDATES: tuple[float | None, ...] = (30.0, 180.0, None)
#: Validation macro-F1 within which a longer half-life is preferred.
HALF_LIFE_TIE = 0.002
#: Cadences (days) a retraining may choose for the next one.
CADENCE_CANDIDATES_DAYS: tuple[int, ...] = (7, 30, 91)
#: Accuracy (share of tasks, averaged over targets) a cadence may cost by model age.
CADENCE_TOLERANCE = 0.01
#: Fewest new tasks a retraining should bring (else choose a longer cadence).
MIN_TASKS_PER_RETRAIN = 500
#: One-sided 90 % normal quantile for the decay's lower bound.
_Z90 = 1.2816


def choose_half_life(scores: Mapping[float | None, float]) -> float | None:
    """Return the half-life with the best score, preferring the longer in a near tie.

    ``scores`` maps each candidate (days, or None for no decay) to its validation
    macro-F1. Longer means more history counts: None is the longest.
    """
    if not scores:
        raise ValueError(
            "The 'scores' field must hold at least one half-life. Got none instead."
        )
    best = max(scores.values())
    near = [h for h, s in scores.items() if s >= best - HALF_LIFE_TIE]
    return max(near, key=lambda h: np.inf if h is None else h)


@dataclass(frozen=True)
class CadenceChoice:
    """The cadence a retraining chose, and the evidence it chose it on."""

    days: int
    loss_per_day: float
    observed_days: float
    n_tasks: int
    tasks_per_day: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """Return the choice as plain values (bundle info, reports)."""
        return asdict(self)


def decay_lower_bound(age_days: np.ndarray, correct: np.ndarray) -> tuple[float, float]:
    """Return (loss per day, its one-sided 90 % lower bound, floored at zero).

    The loss is minus the least-squares slope of ``correct`` (0..1 per task) on
    ``age_days``; fewer than 3 tasks or no spread in age give no evidence (0, 0).
    """
    age = np.asarray(age_days, dtype=float)
    y = np.asarray(correct, dtype=float)
    if age.size < 3 or np.ptp(age) <= 0:
        return 0.0, 0.0
    centred = age - age.mean()
    sxx = float(centred @ centred)
    slope = float(centred @ (y - y.mean())) / sxx
    residual = y - y.mean() - slope * centred
    se = float(np.sqrt(residual @ residual / (age.size - 2) / sxx))
    loss = -slope
    return max(loss, 0.0), max(loss - _Z90 * se, 0.0)


def choose_cadence(
    age_days: np.ndarray,
    correct: np.ndarray,
    tasks_per_day: float,
    candidates: tuple[int, ...] = CADENCE_CANDIDATES_DAYS,
    tolerance: float = CADENCE_TOLERANCE,
    min_tasks: int = MIN_TASKS_PER_RETRAIN,
) -> CadenceChoice:
    """Return the longest cadence whose expected accuracy cost stays within tolerance.

    ``age_days`` is each validation task's age (days after the newest training
    task), ``correct`` its share of targets predicted right, ``tasks_per_day``
    the deployment's recent arrival rate of tasks.
    """
    if not candidates:
        raise ValueError(
            "The 'candidates' field must hold at least one cadence. Got none instead."
        )
    ordered = sorted(candidates)
    fitted, loss = decay_lower_bound(age_days, correct)
    observed = float(np.ptp(age_days)) if np.size(age_days) else 0.0
    affordable = [c for c in ordered if loss * c / 2 <= tolerance]
    days = affordable[-1] if affordable else ordered[0]
    why = (
        f"accuracy falls by at least {loss:.4f} a day of model age "
        f"(fit {fitted:.4f}, {np.size(age_days)} validation tasks over "
        f"{observed:.1f} days): {days} days cost at most {tolerance:.0%}"
    )
    if loss == 0:
        why = (
            "no fall of accuracy with model age stands out of the noise (fit "
            f"{fitted:.4f} a day, {np.size(age_days)} validation tasks over "
            f"{observed:.1f} days): the longest cadence, {days} days"
        )
    if not affordable:
        why = (
            f"accuracy falls by at least {loss:.4f} a day of model age: even "
            f"{days} days cost more than {tolerance:.0%}, the shortest is chosen"
        )
    longer = [c for c in ordered if c >= days and tasks_per_day * c >= min_tasks]
    if tasks_per_day * days < min_tasks:
        days = longer[0] if longer else ordered[-1]
        why += (
            f"; at {tasks_per_day:.0f} tasks a day, {days} days is the shortest "
            f"cadence bringing {min_tasks} new tasks (or the longest there is)"
        )
    return CadenceChoice(
        days=int(days),
        loss_per_day=float(loss),
        observed_days=observed,
        n_tasks=int(np.size(age_days)),
        tasks_per_day=float(tasks_per_day),
        reason=why,
    )
