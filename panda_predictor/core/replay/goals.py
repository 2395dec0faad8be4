"""The replay goals: does a strategy beat scouts, and does nothing simpler beat it?

Skipping scouts is worth it only if it fails no more jobs than scouts do, wastes no
more than scouts do, and removes most of the wait: the bulk of a task must start in
at most a fifth of the time it waits for its scouts. And it must not be dominated:
no other row (the request rows, the sizing peers, the recency rules, scouts; not
the oracle, which no one can run, nor the other rows of the predictor) may fail
fewer jobs *and* waste less at no more bulk delay. Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from panda_predictor.core.replay.engine import ReplayOutcome

#: The bulk delay a strategy may keep, as a share of the scouts' bulk delay.
MAX_DELAY_SHARE = 0.2
#: Goal names in report order.
GOALS = ("failed_jobs", "waste", "bulk_delay", "not_dominated")
#: Rows that never count as dominating: the oracle is not a strategy one can run.
NOT_COMPARED = ("oracle",)
#: Prefix of the predictor's own rows (variants of the product, not the bar).
PREDICTOR_PREFIX = "predictor ("


def _find(outcomes: Sequence[ReplayOutcome], name: str) -> ReplayOutcome:
    for outcome in outcomes:
        if outcome.strategy == name:
            return outcome
    raise ValueError(
        f"The 'strategy' field must name a replayed strategy "
        f"({[o.strategy for o in outcomes]}). Got {name!r} instead."
    )


def dominates(other: ReplayOutcome, mine: ReplayOutcome) -> bool:
    """Return whether ``other`` fails fewer jobs and wastes less at no more delay.

    Fewer failed jobs is strict; less waste means no more wasted core-hours and no
    more GB-hours, and strictly less of one of them (a time replay wastes no
    GB-hours, a memory replay no core-hours); the bulk delay may be equal.
    """
    less_waste = (
        other.wasted_core_hours <= mine.wasted_core_hours
        and other.wasted_gb_hours <= mine.wasted_gb_hours
        and (
            other.wasted_core_hours < mine.wasted_core_hours
            or other.wasted_gb_hours < mine.wasted_gb_hours
        )
    )
    return (
        other.failed_job_rate < mine.failed_job_rate
        and less_waste
        and other.mean_bulk_delay_hours <= mine.mean_bulk_delay_hours
    )


def dominated_by(outcomes: Sequence[ReplayOutcome], strategy: str) -> list[str]:
    """Return the rows that dominate ``strategy`` (see :func:`dominates`).

    Compared: every other row but the oracle and the predictor's own rows.
    """
    mine = _find(outcomes, strategy)
    return [
        o.strategy
        for o in outcomes
        if o.strategy != strategy
        and o.strategy not in NOT_COMPARED
        and not o.strategy.startswith(PREDICTOR_PREFIX)
        and dominates(o, mine)
    ]


def replay_goals(
    outcomes: Sequence[ReplayOutcome],
    strategy: str,
    reference: str = "scouts",
    max_delay_share: float = MAX_DELAY_SHARE,
) -> dict[str, Any]:
    """Return which goals ``strategy`` meets against ``reference``, with the figures.

    ``failed_jobs``: its failed job rate is at most the reference's; ``waste``: its
    wasted core-hours and GB-hours are each at most the reference's; ``bulk_delay``:
    its mean bulk delay is at most ``max_delay_share`` times the reference's;
    ``not_dominated``: no row dominates it (:func:`dominated_by`). ``all`` is their
    conjunction; ``figures`` holds (strategy, reference) pairs and ``dominated_by``
    the dominating rows.
    """
    if not 0.0 <= max_delay_share <= 1.0:
        raise ValueError(
            "The 'max_delay_share' field must be in [0, 1]. "
            f"Got {max_delay_share!r} instead."
        )
    mine, ref = _find(outcomes, strategy), _find(outcomes, reference)
    beaten_by = dominated_by(outcomes, strategy)
    met = {
        "failed_jobs": mine.failed_job_rate <= ref.failed_job_rate,
        "waste": mine.wasted_core_hours <= ref.wasted_core_hours
        and mine.wasted_gb_hours <= ref.wasted_gb_hours,
        "bulk_delay": mine.mean_bulk_delay_hours
        <= max_delay_share * ref.mean_bulk_delay_hours,
        "not_dominated": not beaten_by,
    }
    return {
        "strategy": strategy,
        "reference": reference,
        **met,
        "all": all(met.values()),
        "dominated_by": beaten_by,
        "figures": {
            "failed_job_rate": (mine.failed_job_rate, ref.failed_job_rate),
            "wasted_core_hours": (mine.wasted_core_hours, ref.wasted_core_hours),
            "wasted_gb_hours": (mine.wasted_gb_hours, ref.wasted_gb_hours),
            "mean_bulk_delay_hours": (
                mine.mean_bulk_delay_hours,
                max_delay_share * ref.mean_bulk_delay_hours,
            ),
        },
    }


def goal_marks(goals: Mapping[str, Any]) -> str:
    """Return ✓/✗ per goal of :data:`GOALS`, in order, from :func:`replay_goals`'
    answer (or any mapping with those keys)."""
    return "".join("✓" if goals[g] else "✗" for g in GOALS)
