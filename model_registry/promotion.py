"""Promote a new bundle to champion only if the gate's verdicts allow it.

:func:`promote_if_not_worse` judges the evidence (:func:`model_registry.gate.judge`),
records the decision and every metric's verdict as tags on the version, and moves
the aliases: ``champion`` on promotion (the old champion becomes ``previous``),
``challenger`` otherwise. What is judged, and how, is :mod:`model_registry.gate`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from model_registry.gate import (
    HIGHER,
    LOWER,
    GateEvidence,
    GateThresholds,
    MetricVerdict,
    judge,
)
from model_registry.registry import (
    CHALLENGER,
    CHAMPION,
    PREVIOUS,
    PREVIOUS_CHAMPION_TAG,
    champion_version,
    set_alias,
)
from model_registry.tracking import mlflow_client
from model_registry.verdict_table import verdict_table

if TYPE_CHECKING:
    from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)

GATE_TAG_PREFIX = "gate."
#: MLflow refuses longer tag values.
_MAX_TAG = 5000


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
    below = [
        v.metric for v in verdicts if v.passed_floor is False and v.better == HIGHER
    ]
    missed = [
        v.goal_text() for v in verdicts if v.passed_floor is False and v.better == LOWER
    ]
    problems = []
    if worse:
        problems.append("worse than champion on " + ", ".join(worse))
    if below:
        problems.append("below its floor on " + ", ".join(below))
    if missed:
        problems.append("replay goals missed: " + ", ".join(missed))
    if problems:
        return "; ".join(problems)
    floors = sum(v.passed_floor is True and v.better == HIGHER for v in verdicts)
    goals = [v.goal_text() for v in verdicts if v.passed_floor and v.better == LOWER]
    met = f"; replay goals met: {', '.join(goals)}" if goals else ""
    if compared:
        return (
            f"not worse than champion on "
            f"{sum(v.passed_champion is True for v in verdicts)} metrics, "
            f"above the floor on {floors}{met}"
        )
    first = "first model" if not has_champion else "champion not compared"
    return f"{first}: above the floor on {floors} metrics{met}"


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
