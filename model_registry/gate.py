"""Promote a new bundle to champion only if it is not worse than the current one.

Both metric sets must come from the SAME test data: the training pipeline evaluates
the current champion on the new test split and passes both dicts here. Metric names
are flat strings (``mean_accuracy``, ``ramcount.tail_recall``,
``ramcount.under_allocation``). Each rule of :class:`GateThresholds` names a pattern
of metric names, whether higher or lower is better, and how much worse the challenger
may be; the challenger becomes ``champion`` only if every rule holds for every
matching metric the champion has, else it becomes ``challenger``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from model_registry.registry import (
    CHALLENGER,
    CHAMPION,
    PREVIOUS,
    champion_version,
    set_alias,
)
from model_registry.tracking import mlflow_client

if TYPE_CHECKING:
    from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)

HIGHER = "higher"
LOWER = "lower"
GATE_TAG_PREFIX = "gate."


@dataclass(frozen=True)
class GateThresholds:
    """How much worse than the champion a challenger may be and still replace it.

    Attributes
    ----------
    max_accuracy_drop:
        ``mean_accuracy`` (mean over targets of per-class accuracy) may fall by at
        most this much.
    max_tail_recall_drop:
        Each ``<target>.tail_recall`` (recall on the largest class, which protects
        against jobs killed for too little memory or time) may fall by at most this.
    max_under_allocation_rise:
        Each ``<target>.under_allocation`` (share of tasks predicted below their true
        class) may rise by at most this.
    """

    max_accuracy_drop: float = 0.005
    max_tail_recall_drop: float = 0.01
    max_under_allocation_rise: float = 0.005

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int | float) or not value >= 0:
                raise ValueError(
                    f"The '{name}' threshold must be a number >= 0. Got {value!r} "
                    "instead."
                )

    def rules(self) -> tuple[tuple[str, str, float], ...]:
        """Return ``(metric pattern, better direction, tolerance)`` triples."""
        return (
            ("mean_accuracy", HIGHER, self.max_accuracy_drop),
            ("*.tail_recall", HIGHER, self.max_tail_recall_drop),
            ("*.under_allocation", LOWER, self.max_under_allocation_rise),
        )


@dataclass(frozen=True)
class Comparison:
    """One metric of challenger against champion under one rule."""

    metric: str
    champion: float
    challenger: float | None
    better: str
    tolerance: float
    passed: bool

    @property
    def worsening(self) -> float | None:
        """Return how much worse the challenger is (negative: better)."""
        if self.challenger is None:
            return None
        diff = self.challenger - self.champion
        return -diff if self.better == HIGHER else diff


@dataclass(frozen=True)
class GateDecision:
    """The gate's verdict on one challenger, as recorded on its version."""

    version: int
    alias: str
    promoted: bool
    champion_version: int | None
    reason: str
    comparisons: tuple[Comparison, ...] = ()


def compare(
    challenger_metrics: Mapping[str, float],
    champion_metrics: Mapping[str, float],
    thresholds: GateThresholds,
) -> tuple[Comparison, ...]:
    """Return every rule check of the challenger against the champion.

    A metric the champion has but the challenger lacks (or has as NaN) fails: the
    gate cannot show it is not worse. A metric the champion lacks is not checked.
    """
    results = []
    for metric in sorted(champion_metrics):
        for pattern, better, tolerance in thresholds.rules():
            if not fnmatchcase(metric, pattern):
                continue
            champ = float(champion_metrics[metric])
            if math.isnan(champ):
                continue
            raw = challenger_metrics.get(metric)
            chall = None if raw is None or math.isnan(float(raw)) else float(raw)
            if chall is None:
                passed = False
            elif better == HIGHER:
                passed = chall >= champ - tolerance
            else:
                passed = chall <= champ + tolerance
            results.append(Comparison(metric, champ, chall, better, tolerance, passed))
    return tuple(results)


def _record(
    settings: Settings, decision: GateDecision, thresholds: GateThresholds
) -> None:
    """Store the decision and each comparison as tags on the challenger's version."""
    client = mlflow_client(settings)
    name, version = settings.model_name, str(decision.version)
    tags = {
        "decision": decision.alias,
        "reason": decision.reason,
        "against_version": str(decision.champion_version or ""),
        "thresholds": json.dumps(asdict(thresholds), sort_keys=True),
    }
    for c in decision.comparisons:
        tags[f"{c.metric}"] = (
            f"{'ok' if c.passed else 'WORSE'} challenger={c.challenger!r} "
            f"champion={c.champion!r} better={c.better} tolerance={c.tolerance!r}"
        )
    for key, value in tags.items():
        client.set_model_version_tag(name, version, f"{GATE_TAG_PREFIX}{key}", value)


def promote_if_not_worse(
    settings: Settings,
    challenger_version: int,
    challenger_metrics: Mapping[str, float],
    champion_metrics: Mapping[str, float] | None,
    thresholds: GateThresholds | None = None,
    *,
    promote_incomparable: bool = True,
) -> GateDecision:
    """Make ``challenger_version`` champion if it is not worse, else challenger.

    The first model ever registered becomes champion. On promotion the old champion
    gets the ``previous`` alias (rollback: ``set_alias(settings, v, "champion")``).

    Parameters
    ----------
    settings:
        Settings naming the store and ``model_name``.
    challenger_version:
        Registered version of the new bundle.
    challenger_metrics:
        The new bundle's test metrics.
    champion_metrics:
        The current champion's metrics on the same test data; ``None`` when there is
        no champion or it cannot score this data (other features or bins).
    thresholds:
        Allowed worsening; defaults to :class:`GateThresholds()`.
    promote_incomparable:
        What to do when a champion exists but ``champion_metrics`` is ``None``:
        promote the challenger (default: new features or bins replace the old
        ones) or make it ``challenger`` for a person to decide.
    """
    limits = thresholds or GateThresholds()
    current = champion_version(settings)
    if current is None:
        decision = GateDecision(
            challenger_version, CHAMPION, True, None, "first model: no champion yet"
        )
    elif current.version == challenger_version:
        decision = GateDecision(
            challenger_version, CHAMPION, True, current.version, "already champion"
        )
    else:
        if champion_metrics is None:
            alias = CHAMPION if promote_incomparable else CHALLENGER
            reason = (
                f"champion (version {current.version}) could not be scored on the "
                f"same test data; incomparable, made {alias} without comparison"
            )
            logger.warning(
                "Gate: %s version %s: %s",
                settings.model_name,
                challenger_version,
                reason,
            )
            decision = GateDecision(
                challenger_version, alias, alias == CHAMPION, current.version, reason
            )
            return _apply(settings, decision, limits, current.version)
        comparisons = compare(challenger_metrics, champion_metrics, limits)
        failed = [c.metric for c in comparisons if not c.passed]
        if failed:
            reason = "worse than champion on " + ", ".join(failed)
        else:
            reason = f"not worse than champion on {len(comparisons)} metrics"
        decision = GateDecision(
            challenger_version,
            CHALLENGER if failed else CHAMPION,
            not failed,
            current.version,
            reason,
            comparisons,
        )
    return _apply(settings, decision, limits, current.version if current else None)


def _apply(
    settings: Settings,
    decision: GateDecision,
    limits: GateThresholds,
    current_version: int | None,
) -> GateDecision:
    """Record the decision on the version, then move the aliases accordingly."""
    _record(settings, decision, limits)
    if (
        decision.promoted
        and current_version is not None
        and current_version != decision.version
    ):
        set_alias(settings, current_version, PREVIOUS)
    set_alias(settings, decision.version, decision.alias)
    logger.info(
        "Gate: %s version %s -> %s (%s)",
        settings.model_name,
        decision.version,
        decision.alias,
        decision.reason,
    )
    return decision
