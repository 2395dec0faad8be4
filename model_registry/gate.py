"""Promote a new bundle to champion only if it beats the floors and is not worse.

Everything the gate judges comes from ONE test set, measured by the training
pipeline (:mod:`pipelines.gate_evidence`) and handed over as :class:`GateEvidence`:

* the challenger's metrics, and the current champion's on the same tasks;
* the *floors*: what the majority class and the best recency rule score there;
* the *noise*: half the width of a 90 % paired bootstrap interval of each
  difference (resampling test days), so a lead or a drop that chance alone explains
  counts for nothing;
* the tail recall target the decision rules were tuned for.

A challenger is promoted only if, for every metric the rules name:

* it is not worse than the champion by more than the tolerance plus the noise;
* as it serves (``served.mean_accuracy``: model, tail rules and the combination
  with the recency rules) it beats every floor by more than the noise;
* each ``<target>.tail_recall`` reaches the target, less the allowed shortfall and
  the noise.

Nothing is promoted when a model could not be scored, when no floor was measured,
or, unless asked for, when the champion cannot be compared (other bins). Metric
names are flat strings (``mean_accuracy``, ``ramcount.tail_recall``,
``ramcount.under_allocation``).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from model_registry.registry import (
    CHALLENGER,
    CHAMPION,
    PREVIOUS,
    PREVIOUS_CHAMPION_TAG,
    champion_version,
    set_alias,
)
from model_registry.tolerances import (
    TOLERANCE_NAMES,
    ToleranceError,
    parse_tolerances,
)
from model_registry.tracking import mlflow_client
from model_registry.verdict_table import verdict_table

if TYPE_CHECKING:
    from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)

HIGHER = "higher"
LOWER = "lower"
GATE_TAG_PREFIX = "gate."
#: The mean accuracy of the bundle as it serves (model, tail rules and the
#: combination with the recency rules): what PanDA would get.
SERVED_ACCURACY = "served.mean_accuracy"
#: Metrics a challenger must win on against every floor.
FLOOR_METRICS = (SERVED_ACCURACY,)
#: Reference name of the challenger's own noise (for the tail recall target).
SELF = "challenger"
#: MLflow refuses longer tag values.
_MAX_TAG = 5000


@dataclass(frozen=True)
class GateThresholds:
    """How much worse than the champion a challenger may be and still replace it.

    Each tolerance is added to the test set's noise for that metric: a difference
    within both is not held against the challenger.

    Attributes
    ----------
    max_accuracy_drop:
        ``mean_accuracy`` (mean over targets of each target's accuracy) may fall by
        at most this much.
    max_tail_recall_drop:
        Each ``<target>.tail_recall`` (recall on the largest class, which protects
        against jobs killed for too little memory or time) may fall by at most this.
    max_under_allocation_rise:
        Each ``<target>.under_allocation`` (share of tasks predicted below their true
        class) may rise by at most this.
    max_tail_recall_shortfall:
        How far below the tail recall target (beyond the noise) each
        ``<target>.tail_recall`` may be. The rules reach the target on validation
        data; the test set is later in time and usually a little below.
    floor_noise_factor:
        The lead over each floor must exceed this many noise half-widths: 1 (a
        lead chance does not explain), 0 (any lead), down to -1 (only "not clearly
        below": for test sets too small to tell a model from the rules).
    """

    max_accuracy_drop: float = 0.005
    max_tail_recall_drop: float = 0.01
    max_under_allocation_rise: float = 0.005
    max_tail_recall_shortfall: float = 0.05
    floor_noise_factor: float = 1.0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            lowest = -1.0 if name == "floor_noise_factor" else 0.0
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not value >= lowest
                or not math.isfinite(value)
            ):
                raise ValueError(
                    f"The '{name}' threshold must be a finite number >= {lowest:g}. "
                    f"Got {value!r} instead."
                )

    @classmethod
    def from_settings(
        cls, settings: Settings, overrides: Iterable[str] = ()
    ) -> GateThresholds:
        """Return the tolerances of the settings, then of ``overrides``.

        Parameters
        ----------
        settings:
            Settings with the ``gate_*`` tolerances.
        overrides:
            ``NAME=VALUE`` texts as the CLI takes them (see
            :func:`parse_tolerances`).
        """
        fields = {
            "max_accuracy_drop": settings.gate_max_accuracy_drop,
            "max_tail_recall_drop": settings.gate_max_tail_recall_drop,
            "max_under_allocation_rise": settings.gate_max_under_allocation_rise,
            "max_tail_recall_shortfall": settings.gate_tail_recall_shortfall,
            "floor_noise_factor": settings.gate_floor_noise_factor,
        }
        return cls(**{**fields, **parse_tolerances(overrides)})

    def rules(self) -> tuple[tuple[str, str, float], ...]:
        """Return ``(metric pattern, better direction, tolerance)`` triples."""
        return (
            ("mean_accuracy", HIGHER, self.max_accuracy_drop),
            (SERVED_ACCURACY, HIGHER, self.max_accuracy_drop),
            ("*.tail_recall", HIGHER, self.max_tail_recall_drop),
            ("*.under_allocation", LOWER, self.max_under_allocation_rise),
        )


@dataclass(frozen=True)
class GateEvidence:
    """What the training pipeline measured on one test set, for the gate to judge.

    Attributes
    ----------
    challenger:
        The new bundle's test metrics.
    champion:
        The current champion's metrics on the same test tasks; ``None`` when there
        is no champion or it cannot be compared (see ``incomparable``).
    floors:
        Per floor (``majority``, ``best_recency``) its metrics on the same tasks.
    noise:
        Per reference (``champion``, a floor name, or ``challenger`` for the
        challenger's own figures) and metric: half the width of the 90 % paired
        bootstrap interval of the difference (of the figure itself for
        ``challenger``).
    tail_recall_target:
        Recall the largest class of each target must keep; ``None``: not checked.
    unscored:
        Why a model could not be scored on the test set: nothing is promoted.
    incomparable:
        Why the champion cannot be compared (e.g. other bins).
    """

    challenger: Mapping[str, float]
    champion: Mapping[str, float] | None = None
    floors: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    noise: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    tail_recall_target: float | None = None
    unscored: str | None = None
    incomparable: str | None = None

    def noise_of(self, reference: str, metric: str) -> float:
        """Return the noise of ``metric`` against ``reference`` (0 if unmeasured)."""
        value = self.noise.get(reference, {}).get(metric)
        # inf is kept: it means the test set cannot judge the metric at all.
        return 0.0 if value is None or math.isnan(value) else float(value)


@dataclass(frozen=True)
class MetricVerdict:
    """One metric: the challenger against the champion, its floor, and the noise.

    ``passed_champion`` / ``passed_floor`` are ``None`` when that check does not
    apply to the metric (no champion, or a metric without a floor).
    """

    metric: str
    better: str
    challenger: float | None
    champion: float | None
    tolerance: float
    champion_noise: float
    passed_champion: bool | None
    floor: float | None = None
    floor_name: str | None = None
    floor_noise: float = 0.0
    passed_floor: bool | None = None

    @property
    def passed(self) -> bool:
        """Return whether no applicable check failed."""
        return self.passed_champion is not False and self.passed_floor is not False

    @property
    def worsening(self) -> float | None:
        """Return how much worse than the champion (negative: better)."""
        if self.challenger is None or self.champion is None:
            return None
        diff = self.challenger - self.champion
        return -diff if self.better == HIGHER else diff

    def describe(self) -> str:
        """Return one line: verdict, challenger, champion, floor, tolerance, noise."""
        parts = [
            f"{self.metric}: {'ok' if self.passed else 'FAILED'}",
            f"challenger={_fmt(self.challenger)}",
        ]
        if self.champion is not None:
            parts.append(
                f"champion={_fmt(self.champion)} "
                f"({'ok' if self.passed_champion else 'worse'}; "
                f"tolerance {self.tolerance:.4f} + noise {self.champion_noise:.4f})"
            )
        if self.floor_name is not None:
            parts.append(
                f"floor {self.floor_name}={_fmt(self.floor)} "
                f"({'ok' if self.passed_floor else 'not beaten'}; "
                f"noise {self.floor_noise:.4f})"
            )
        parts.append(f"{self.better} is better")
        return " ".join(parts)


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


@dataclass(frozen=True)
class GateDecision:
    """The gate's verdict on one challenger, as recorded on its version."""

    version: int
    alias: str
    promoted: bool
    champion_version: int | None
    reason: str
    verdicts: tuple[MetricVerdict, ...] = ()

    def describe(self) -> list[str]:
        """Return the decision and one line per metric (for the CLI and logs)."""
        head = f"version {self.version} -> {self.alias}: {self.reason}"
        return [head, *(f"  {v.describe()}" for v in self.verdicts)]

    def table(self) -> list[str]:
        """Return the decision and a table: per metric champion, challenger,
        difference, tolerance, noise, floor and verdict."""
        return [
            f"version {self.version} -> {self.alias}: {self.reason}",
            *verdict_table(self.verdicts),
        ]

    def to_dict(self) -> dict[str, Any]:
        """Return the decision as a JSON-ready dict."""
        return asdict(self)


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _floor_check(
    metric: str, challenger: float | None, evidence: GateEvidence, factor: float
) -> tuple[float | None, str | None, float, bool | None]:
    """Return the binding floor of ``metric``: value, name, noise and whether beaten.

    Every floor must be beaten by more than ``factor`` times its noise; the one with
    the least room (lead minus that) is reported.
    """
    if metric in FLOOR_METRICS:
        worst: tuple[float, float, str, float] | None = None
        for name, metrics in sorted(evidence.floors.items()):
            value = _finite(metrics.get(metric))
            if value is None:
                continue
            noise = evidence.noise_of(name, metric)
            if challenger is None:
                room = -math.inf
            elif math.isinf(noise):
                room = -math.inf  # a floor the test set cannot tell apart
            else:
                room = challenger - value - factor * noise
            if worst is None or room < worst[0]:
                worst = (room, value, name, noise)
        if worst is None:
            return None, "none measured", 0.0, False
        room, value, name, noise = worst
        return value, name, noise, challenger is not None and room > 0
    return None, None, 0.0, None


def judge(
    evidence: GateEvidence, thresholds: GateThresholds
) -> tuple[MetricVerdict, ...]:
    """Return one verdict per gated metric of the challenger (and the champion).

    A metric the champion has but the challenger lacks (or has as NaN) fails: the
    gate cannot show it is not worse. A metric the champion lacks is checked only
    against its floor.
    """
    names = set(evidence.challenger) | set(evidence.champion or {})
    verdicts = []
    for metric in sorted(names):
        for pattern, better, tolerance in thresholds.rules():
            if not fnmatchcase(metric, pattern):
                continue
            chall = _finite(evidence.challenger.get(metric))
            champ = _finite((evidence.champion or {}).get(metric))
            champion_noise = evidence.noise_of(CHAMPION, metric)
            passed_champion = None
            if champ is not None:
                if chall is None:
                    passed_champion = False
                else:
                    worse = champ - chall if better == HIGHER else chall - champ
                    passed_champion = worse <= tolerance + champion_noise + 1e-12
            floor, floor_name, floor_noise, passed_floor = _floor_check(
                metric, chall, evidence, thresholds.floor_noise_factor
            )
            target = evidence.tail_recall_target
            if metric.endswith(".tail_recall") and target is not None:
                floor = max(0.0, target - thresholds.max_tail_recall_shortfall)
                floor_name = f"target {target:g} - shortfall"
                floor_noise = evidence.noise_of(SELF, metric)
                passed_floor = chall is not None and chall >= floor - floor_noise
            verdicts.append(
                MetricVerdict(
                    metric,
                    better,
                    chall,
                    champ,
                    tolerance,
                    champion_noise,
                    passed_champion,
                    floor,
                    floor_name,
                    floor_noise,
                    passed_floor,
                )
            )
    return tuple(verdicts)


def _tag_value(text: str) -> str:
    return text if len(text) <= _MAX_TAG else text[: _MAX_TAG - 3] + "..."


def _record(
    settings: Settings, decision: GateDecision, thresholds: GateThresholds
) -> None:
    """Store the decision and each metric's verdict as tags on the version."""
    client = mlflow_client(settings)
    name, version = settings.model_name, str(decision.version)
    tags = {
        "decision": decision.alias,
        "reason": decision.reason,
        "against_version": str(decision.champion_version or ""),
        "thresholds": json.dumps(asdict(thresholds), sort_keys=True),
    }
    for v in decision.verdicts:
        tags[v.metric] = v.describe()
    for key, value in tags.items():
        client.set_model_version_tag(
            name, version, f"{GATE_TAG_PREFIX}{key}", _tag_value(value)
        )


def _reason(
    verdicts: tuple[MetricVerdict, ...], compared: bool, has_champion: bool
) -> str:
    worse = [v.metric for v in verdicts if v.passed_champion is False]
    below = [v.metric for v in verdicts if v.passed_floor is False]
    problems = []
    if worse:
        problems.append("worse than champion on " + ", ".join(worse))
    if below:
        problems.append("below its floor on " + ", ".join(below))
    if problems:
        return "; ".join(problems)
    floors = sum(v.passed_floor is True for v in verdicts)
    if compared:
        return (
            f"not worse than champion on "
            f"{sum(v.passed_champion is True for v in verdicts)} metrics, "
            f"above the floor on {floors}"
        )
    first = "first model" if not has_champion else "champion not compared"
    return f"{first}: above the floor on {floors} metrics"


def promote_if_not_worse(
    settings: Settings,
    challenger_version: int,
    evidence: GateEvidence,
    thresholds: GateThresholds | None = None,
    *,
    promote_incomparable: bool = False,
) -> GateDecision:
    """Make ``challenger_version`` champion if it passes the gate, else challenger.

    On promotion the old champion gets the ``previous`` alias (rollback:
    ``set_alias(settings, v, "champion")``).

    Parameters
    ----------
    settings:
        Settings naming the store and ``model_name``.
    challenger_version:
        Registered version of the new bundle.
    evidence:
        Metrics, floors and noise measured on one test set.
    thresholds:
        Allowed worsening; defaults to :class:`GateThresholds()`.
    promote_incomparable:
        Promote a challenger whose champion cannot be compared (other bins) if
        it passes its floors; by default it becomes ``challenger`` for a person to
        decide (``panda-predictor`` ... ``set_alias``).
    """
    if not isinstance(evidence, GateEvidence):
        raise TypeError(
            "The 'evidence' argument must be a GateEvidence (metrics, floors and "
            f"noise of one test set). Got {type(evidence).__name__} instead."
        )
    limits = thresholds or GateThresholds()
    current = champion_version(settings)
    against = current.version if current else None
    if current is not None and current.version == challenger_version:
        decision = GateDecision(
            challenger_version, CHAMPION, True, against, "already champion"
        )
        return _apply(settings, decision, limits, against)
    if evidence.unscored:
        reason = f"not promoted: {evidence.unscored}"
        logger.warning(
            "Gate: %s version %s %s", settings.model_name, challenger_version, reason
        )
        decision = GateDecision(challenger_version, CHALLENGER, False, against, reason)
        return _apply(settings, decision, limits, against)
    verdicts = judge(evidence, limits)
    compared = current is not None and evidence.champion is not None
    reason = _reason(verdicts, compared, current is not None)
    promoted = all(v.passed for v in verdicts) and bool(verdicts)
    if not verdicts:
        reason = "no gated metric measured"
    if promoted and current is not None and evidence.champion is None:
        why = evidence.incomparable or "the champion was not scored on this test set"
        if promote_incomparable:
            reason = f"incomparable ({why}), promoted as asked; {reason}"
        else:
            promoted = False
            reason = (
                f"incomparable ({why}): not promoted by default; {reason}. Compare "
                "by hand and move the alias if wanted."
            )
    decision = GateDecision(
        challenger_version,
        CHAMPION if promoted else CHALLENGER,
        promoted,
        against,
        reason,
        verdicts,
    )
    return _apply(settings, decision, limits, against)


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
        mlflow_client(settings).set_model_version_tag(
            settings.model_name,
            str(decision.version),
            PREVIOUS_CHAMPION_TAG,
            str(current_version),
        )
        set_alias(settings, current_version, PREVIOUS)
    set_alias(settings, decision.version, decision.alias)
    for line in decision.describe():
        logger.info("Gate: %s %s", settings.model_name, line)
    return decision


__all__ = [
    "TOLERANCE_NAMES",
    "GateDecision",
    "GateEvidence",
    "GateThresholds",
    "MetricVerdict",
    "ToleranceError",
    "judge",
    "parse_tolerances",
    "promote_if_not_worse",
    "verdict_table",
]
