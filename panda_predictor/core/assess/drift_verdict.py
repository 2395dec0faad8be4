"""Judge recent outcomes against a model's test figures, and give a drift verdict.

:func:`performance_drift` compares feedback accuracy and under-allocation with the
model's test figures; :class:`DriftResult` holds everything one drift check found
(the task features' and predicted classes' drift of
:mod:`panda_predictor.core.assess.drift`, and the outcomes') and says whether the
model drifted, did not, or saw too few outcomes to say.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from panda_predictor.core.assess.drift import DriftThresholds, FeatureDrift

_DEFAULT_THRESHOLDS = DriftThresholds()


@dataclass(frozen=True)
class PerformanceDrift:
    """Feedback figures of one target against the model's test figures."""

    target: str
    n: int
    accuracy: float
    under_allocation: float
    test_accuracy: float
    test_under_allocation: float
    drifted: bool
    reason: str = ""


def performance_drift(
    scores: Mapping[str, Mapping[str, float]],
    test_metrics: Mapping[str, float],
    thresholds: DriftThresholds = _DEFAULT_THRESHOLDS,
) -> list[PerformanceDrift]:
    """Judge feedback scores per target (``n``, ``accuracy``, ``under_allocation``).

    A target drifted when, on at least ``min_tasks`` scored tasks, its
    under-allocation exceeds ``under_allocation_factor`` times the test rate (with
    a floor of one percentage point, so a perfect test rate does not make any miss an
    alarm) or its accuracy fell by more than ``accuracy_drop``.
    """
    out = []
    for target, s in scores.items():
        test_acc = float(test_metrics.get(f"{target}.accuracy", math.nan))
        test_under = float(test_metrics.get(f"{target}.under_allocation", math.nan))
        n = int(s.get("n", 0))
        reasons = []
        if n < thresholds.min_tasks:
            note = (
                f"too few outcomes for a verdict ({n} scored, minimum "
                f"{thresholds.min_tasks})"
            )
        else:
            note = ""
        if not note:
            limit = thresholds.under_allocation_factor * max(test_under, 0.01)
            if s["under_allocation"] > limit:
                reasons.append(
                    f"under-allocation {s['under_allocation']:.3f} > {limit:.3f}"
                )
            if s["accuracy"] < test_acc - thresholds.accuracy_drop:
                reasons.append(
                    f"accuracy {s['accuracy']:.3f} < test {test_acc:.3f} - "
                    f"{thresholds.accuracy_drop}"
                )
        out.append(
            PerformanceDrift(
                target,
                n,
                float(s.get("accuracy", math.nan)),
                float(s.get("under_allocation", math.nan)),
                test_acc,
                test_under,
                bool(reasons),
                "; ".join(reasons) or note,
            )
        )
    return out


#: Verdicts of a drift check. ``too_few_outcomes``: nothing drifted, but there were
#: fewer recent tasks or scored outcomes than ``min_tasks``, so "no drift" would
#: claim more than was measured.
DRIFT = "drift"
NO_DRIFT = "no_drift"
TOO_FEW_OUTCOMES = "too_few_outcomes"
VERDICTS = (DRIFT, NO_DRIFT, TOO_FEW_OUTCOMES)


@dataclass
class DriftResult:
    """Everything one drift check found, and its verdict."""

    n_tasks: int
    features: list[FeatureDrift] = field(default_factory=list)
    classes: dict[str, float] = field(default_factory=dict)
    performance: list[PerformanceDrift] = field(default_factory=list)
    class_psi_limit: float = 0.2
    enough_tasks: bool = True
    min_outcomes: int = 50

    @property
    def n_outcomes(self) -> int:
        """Return the most scored outcomes of any target (0: no feedback)."""
        return max((p.n for p in self.performance), default=0)

    @property
    def enough_outcomes(self) -> bool:
        """Return whether enough outcomes were scored to judge performance."""
        return self.n_outcomes >= self.min_outcomes

    @property
    def task_verdict(self) -> str:
        """Return the verdict of the task part (features and predicted classes)."""
        if not self.enough_tasks:
            return TOO_FEW_OUTCOMES
        drifted = any(f.drifted for f in self.features) or any(
            v > self.class_psi_limit for v in self.classes.values()
        )
        return DRIFT if drifted else NO_DRIFT

    @property
    def outcome_verdict(self) -> str:
        """Return the verdict of the feedback part (accuracy, under-allocation)."""
        if any(p.drifted for p in self.performance):
            return DRIFT
        return NO_DRIFT if self.enough_outcomes else TOO_FEW_OUTCOMES

    @property
    def verdict(self) -> str:
        """Return ``drift``, ``no_drift`` or ``too_few_outcomes`` (see VERDICTS).

        Drift anywhere is drift; otherwise any part short of data makes the whole
        verdict ``too_few_outcomes``, never a "no drift" it could not measure.
        """
        parts = (self.task_verdict, self.outcome_verdict)
        if DRIFT in parts:
            return DRIFT
        return TOO_FEW_OUTCOMES if TOO_FEW_OUTCOMES in parts else NO_DRIFT

    def feature_figures(self) -> dict[str, dict[str, Any]]:
        """Return per feature its PSI, threshold, can-alarm flag, and whether it
        drifted (the shape kept in ``pp_drift_run``)."""
        return {
            f.feature: {
                "psi": f.psi,
                "threshold": f.threshold,
                "alarm": f.can_alarm,
                "drifted": f.drifted,
                "unseen_share": f.unseen_share,
            }
            for f in self.features
        }

    @property
    def under_allocation(self) -> dict[str, float]:
        """Return the feedback under-allocation rate of each target with outcomes."""
        return {p.target: p.under_allocation for p in self.performance if p.n}

    @property
    def reasons(self) -> list[str]:
        """Return why drift was detected (empty: no drift)."""
        out = []
        if self.enough_tasks:
            out += [
                f"feature {f.feature}: PSI {f.psi:.3f}, unseen {f.unseen_share:.3f}"
                for f in self.features
                if f.drifted
            ]
            out += [
                f"predicted {t} classes: PSI {v:.3f}"
                for t, v in self.classes.items()
                if v > self.class_psi_limit
            ]
        out += [
            f"performance {p.target}: {p.reason}" for p in self.performance if p.drifted
        ]
        return out

    @property
    def drifted(self) -> bool:
        """Return whether any feature, class or performance drift was detected."""
        return bool(self.reasons)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready summary."""
        return {
            "drifted": self.drifted,
            "verdict": self.verdict,
            "reasons": self.reasons,
            "n_tasks": self.n_tasks,
            "n_outcomes": self.n_outcomes,
            "features": [{**vars(f), "alarm": f.can_alarm} for f in self.features],
            "classes": dict(self.classes),
            "performance": [vars(p) for p in self.performance],
        }
