"""The replay goals: does a strategy beat scouts where it matters?

Skipping scouts is worth it only if it fails no more jobs than scouts do, wastes no
more than scouts do, and removes most of the wait: the bulk of a task must start in
at most a fifth of the time it waits for its scouts. Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from panda_predictor.core.replay import ReplayOutcome

#: The bulk delay a strategy may keep, as a share of the scouts' bulk delay.
MAX_DELAY_SHARE = 0.2
#: Goal names in report order.
GOALS = ("failed_jobs", "waste", "bulk_delay")


def _find(outcomes: Sequence[ReplayOutcome], name: str) -> ReplayOutcome:
    for outcome in outcomes:
        if outcome.strategy == name:
            return outcome
    raise ValueError(
        f"The 'strategy' field must name a replayed strategy "
        f"({[o.strategy for o in outcomes]}). Got {name!r} instead."
    )


def replay_goals(
    outcomes: Sequence[ReplayOutcome],
    strategy: str,
    reference: str = "scouts",
    max_delay_share: float = MAX_DELAY_SHARE,
) -> dict[str, Any]:
    """Return which goals ``strategy`` meets against ``reference``, with the figures.

    ``failed_jobs``: its failed job rate is at most the reference's; ``waste``: its
    wasted core-hours and GB-hours are each at most the reference's; ``bulk_delay``:
    its mean bulk delay is at most ``max_delay_share`` times the reference's. ``all``
    is their conjunction; ``figures`` holds (strategy, reference) pairs.
    """
    if not 0.0 <= max_delay_share <= 1.0:
        raise ValueError(
            "The 'max_delay_share' field must be in [0, 1]. "
            f"Got {max_delay_share!r} instead."
        )
    mine, ref = _find(outcomes, strategy), _find(outcomes, reference)
    met = {
        "failed_jobs": mine.failed_job_rate <= ref.failed_job_rate,
        "waste": mine.wasted_core_hours <= ref.wasted_core_hours
        and mine.wasted_gb_hours <= ref.wasted_gb_hours,
        "bulk_delay": mine.mean_bulk_delay_hours
        <= max_delay_share * ref.mean_bulk_delay_hours,
    }
    return {
        "strategy": strategy,
        "reference": reference,
        **met,
        "all": all(met.values()),
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
