"""Judge a new bundle: does it meet its goals and is it not worse than the champion?

Everything the gate judges comes from ONE test set, measured by the training
pipeline (:mod:`pipelines.retraining.gate_evidence`) and handed over as
:class:`GateEvidence`:

* the challenger's metrics, and the current champion's on the same tasks;
* the *replay*: the challenger's served decision run on the test tasks with their
  true values as the use: ``served.cost`` (each task alone) and, per priced
  target, ``served.<target>.failed_jobs`` and ``served.<target>.wasted_hours``
  (the tasks replayed as the jobs of bursts under PanDA's rules, as the
  benchmark's headline table replays them), ``served.delay_share``; and what the
  same tasks realize if all run their scouts;
* the *floors*: what the majority class and the best recency rule score there;
* the *noise*: half the width of a 90 % paired bootstrap interval of each
  difference (resampling test days), so a lead or a drop that chance alone explains
  counts for nothing.

A challenger is promoted only if, for every metric the rules name:

* it is not worse than the champion by more than the tolerance plus the noise
  (``<target>.tail_recall`` is judged only so: against the champion);
* as it serves (``served.mean_accuracy``: model, tail rules and the combination
  with the recency rules) it beats every floor by more than the noise;
* its replay meets the goals: ``served.cost`` and, per priced target, the failed
  jobs and the wasted hours at most the scouts' (plus the noise of the paired
  difference), and ``served.delay_share`` at most ``max_delay_share`` (plus its
  noise).

Nothing is promoted when a model could not be scored, when no floor was measured,
or, unless asked for, when the champion cannot be compared (other bins). Metric
names are flat strings (``mean_accuracy``, ``ramcount.tail_recall``,
``served.ramcount.failed_jobs``). :func:`judge` returns one verdict per metric; the
promotion that acts on them is :mod:`model_registry.promotion`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from model_registry.registry import CHAMPION
from model_registry.tolerances import parse_tolerances
from panda_predictor.core.replay.goals import MAX_DELAY_SHARE

if TYPE_CHECKING:
    from panda_predictor.settings import Settings

HIGHER = "higher"
LOWER = "lower"
#: The mean accuracy of the bundle as it serves (model, tail rules and the
#: combination with the recency rules): what PanDA would get.
SERVED_ACCURACY = "served.mean_accuracy"
#: Metrics a challenger must win on against every floor.
FLOOR_METRICS = (SERVED_ACCURACY,)
#: Replayed on the test tasks with their true values as the use: mean realized
#: cost per task in job runs, and the share of tasks that keep their scouts.
SERVED_COST = "served.cost"
SERVED_DELAY = "served.delay_share"
#: What every challenger must show: its floors and replay goals.
REQUIRED_METRICS = (SERVED_ACCURACY, SERVED_COST, SERVED_DELAY)
#: The floor of ``served.cost``: every task runs its scouts.
SCOUTS = "scouts"
#: Reference name of the challenger's own noise (for the replay goals).
SELF = "challenger"


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
    max_delay_share:
        ``served.delay_share`` (share of the tasks that keep their scouts, so their
        bulk waits as long as with scouts) may be at most this, plus the noise:
        the replay goal's bulk delay of at most a fifth of the scouts'.
    floor_noise_factor:
        The lead over each floor must exceed this many noise half-widths: 1 (a
        lead chance does not explain), 0 (any lead), down to -1 (only "not clearly
        below": for test sets too small to tell a model from the rules).
    max_waste_rise:
        Each ``served.<target>.wasted_hours`` may exceed the scouts' by at most
        this fraction of theirs (plus the noise): 0 (no more waste than scouts),
        0.5 (half again). For a site that would rather pay spare hours than failed
        jobs: scouts started at a low default fail jobs but waste little.
    """

    max_accuracy_drop: float = 0.005
    max_tail_recall_drop: float = 0.01
    max_under_allocation_rise: float = 0.005
    max_delay_share: float = MAX_DELAY_SHARE
    floor_noise_factor: float = 1.0
    max_waste_rise: float = 0.0

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
            "max_delay_share": settings.gate_max_delay_share,
            "floor_noise_factor": settings.gate_floor_noise_factor,
            "max_waste_rise": settings.gate_max_waste_rise,
        }
        return cls(**{**fields, **parse_tolerances(overrides)})

    def rules(self) -> tuple[tuple[str, str, float | None], ...]:
        """Return ``(metric pattern, better direction, tolerance)`` triples.

        A tolerance of ``None``: not compared with the champion. Only the
        challenger's decision is replayed, so its goals alone judge the replay.
        """
        return (
            ("mean_accuracy", HIGHER, self.max_accuracy_drop),
            (SERVED_ACCURACY, HIGHER, self.max_accuracy_drop),
            ("*.tail_recall", HIGHER, self.max_tail_recall_drop),
            ("*.under_allocation", LOWER, self.max_under_allocation_rise),
            (SERVED_COST, LOWER, None),
            (failed_jobs_metric("*"), LOWER, None),
            (wasted_hours_metric("*"), LOWER, None),
            (SERVED_DELAY, LOWER, None),
        )


def failed_jobs_metric(target: str) -> str:
    """Return the name of ``target``'s replayed failed-job rate."""
    return f"served.{target}.failed_jobs"


def wasted_hours_metric(target: str) -> str:
    """Return the name of ``target``'s replayed wasted hours per job (core-hours
    for time, GB-hours for memory)."""
    return f"served.{target}.wasted_hours"


#: Replay figures a challenger must keep at most at the scouts' (plus noise).
SCOUTS_GOALS = (SERVED_COST, failed_jobs_metric("*"), wasted_hours_metric("*"))


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
        Per floor (``majority``, ``best_recency``) its metrics on the same tasks;
        ``scouts``: ``served.cost`` if every task ran its scouts.
    noise:
        Per reference (``champion``, a floor name, or ``challenger`` for the
        challenger's own figures) and metric: half the width of the 90 % paired
        bootstrap interval of the difference (of the figure itself for
        ``challenger``).
    tail_recall_target:
        The recall the tail rules were tuned for, kept for the record: the tail
        recall is compared with the champion's only, never with this target.
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
            goal = self.better == LOWER
            missed = "exceeded" if goal else "not beaten"
            parts.append(
                f"{'goal' if goal else 'floor'} {self.floor_name}={_fmt(self.floor)} "
                f"({'ok' if self.passed_floor else missed}; "
                f"noise {self.floor_noise:.4f})"
            )
        parts.append(f"{self.better} is better")
        return " ".join(parts)

    def goal_text(self) -> str:
        """Return the floor or goal check in a few words, e.g.
        ``served.cost 0.8300 <= scouts 1.4200``."""
        if self.challenger is None:
            return f"{self.metric} not measured"
        if self.floor is None:
            return f"{self.metric} {_fmt(self.challenger)}, {self.floor_name}"
        if self.better == LOWER:
            sign = "<=" if self.passed_floor else ">"
        else:
            sign = ">" if self.passed_floor else "<="
        noise = f" + noise {self.floor_noise:.4f}" if self.floor_noise else ""
        return (
            f"{self.metric} {_fmt(self.challenger)} {sign} {self.floor_name} "
            f"{_fmt(self.floor)}{noise}"
        )


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


Check = tuple[float | None, str | None, float, bool | None]


def _goal_check(
    metric: str,
    challenger: float | None,
    evidence: GateEvidence,
    limits: GateThresholds,
) -> Check:
    """Return the floor or replay goal of ``metric``: value, name, noise, passed.

    ``served.cost`` and each target's failed jobs and wasted hours may not exceed
    the scouts' by more than the noise of the paired difference (wasted hours: the
    scouts' times ``1 + max_waste_rise``); the delay share
    may not exceed its threshold by more than its own noise. Other metrics go to
    :func:`_floor_check`.
    """
    if any(fnmatchcase(metric, goal) for goal in SCOUTS_GOALS):
        scouts = _finite(evidence.floors.get(SCOUTS, {}).get(metric))
        if scouts is None:
            return None, "none measured", 0.0, False
        noise = evidence.noise_of(SCOUTS, metric)
        if fnmatchcase(metric, wasted_hours_metric("*")) and limits.max_waste_rise:
            limit = scouts * (1.0 + limits.max_waste_rise)
            name = f"scouts x {1.0 + limits.max_waste_rise:g}"
            return _at_most(challenger, limit, name, noise)
        return _at_most(challenger, scouts, SCOUTS, noise)
    if metric == SERVED_DELAY:
        limit = limits.max_delay_share
        return _at_most(
            challenger, limit, "max_delay_share", evidence.noise_of(SELF, metric)
        )
    return _floor_check(metric, challenger, evidence, limits.floor_noise_factor)


def _at_most(value: float | None, limit: float, name: str, noise: float) -> Check:
    """Return the check that ``value`` is at most ``limit`` plus ``noise``."""
    return limit, name, noise, value is not None and value <= limit + noise + 1e-12


def _floor_check(
    metric: str, challenger: float | None, evidence: GateEvidence, factor: float
) -> Check:
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
    gate cannot show it is not worse; so does a missing :data:`REQUIRED_METRICS`
    figure (nothing shows the floor or goal is met). A metric the champion lacks
    is checked only against its floor or goal.
    """
    names = (
        set(evidence.challenger) | set(evidence.champion or {}) | set(REQUIRED_METRICS)
    )
    verdicts = []
    for metric in sorted(names):
        for pattern, better, tolerance in thresholds.rules():
            if not fnmatchcase(metric, pattern):
                continue
            chall = _finite(evidence.challenger.get(metric))
            compared = tolerance is not None
            champ = _finite((evidence.champion or {}).get(metric)) if compared else None
            champion_noise = evidence.noise_of(CHAMPION, metric)
            passed_champion = None
            if champ is not None and tolerance is not None:
                if chall is None:
                    passed_champion = False
                else:
                    worse = champ - chall if better == HIGHER else chall - champ
                    passed_champion = worse <= tolerance + champion_noise + 1e-12
            floor, floor_name, floor_noise, passed_floor = _goal_check(
                metric, chall, evidence, thresholds
            )
            verdicts.append(
                MetricVerdict(
                    metric,
                    better,
                    chall,
                    champ,
                    tolerance or 0.0,
                    champion_noise,
                    passed_champion,
                    floor,
                    floor_name,
                    floor_noise,
                    passed_floor,
                )
            )
    return tuple(verdicts)
