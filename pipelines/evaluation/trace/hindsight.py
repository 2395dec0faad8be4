"""With hindsight: could keeping the scouts of some tasks meet the replay goals?

The production decision skips the scouts of nearly every task. Where its row misses
a replay goal against the scouts, the next design question is which of two things
is missing: a better *per-task* choice between skipping and scouting, or better
*values*. This module answers the first with hindsight. From the figures per job of
the production row and of the scouts (:class:`~pipelines.evaluation.trace.replay.
TargetReplay`), it keeps the scouts on the tasks where they help most per hour of
bulk delay, until the delay goal's budget (a fifth of the scouts' delay,
:data:`~panda_predictor.core.replay.goals.MAX_DELAY_SHARE`) is spent, and reports
the row that gives.

A task's replay reads only its own jobs, so the row is exact for the chosen tasks;
the choice is greedy, not an optimum. What helps is measured relative to the
scouts' totals, ``(wasted saved) / (scouts' waste) + (failed jobs saved) /
(scouts' failed jobs)``, so neither goal is bought with the other unseen. It is
known only after the tasks ran (their size, their use): a bound to aim at, never an
input, and not a row of the replay table (no one can run it).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from panda_predictor.core.replay.engine import JobOutcomes, ReplayOutcome
from panda_predictor.core.replay.goals import (
    GOALS,
    MAX_DELAY_SHARE,
    goal_marks,
    replay_goals,
)
from panda_predictor.core.replay.tasks import task_index
from pipelines.evaluation.trace.replay import TargetReplay

#: The name of the row (not a strategy: it is chosen after the fact).
HINDSIGHT = "hindsight: scouts kept on chosen tasks"


@dataclass(frozen=True)
class HindsightRow:
    """The production row with the scouts kept on the tasks chosen with hindsight.

    ``kept_tasks`` of ``tasks`` keep their scouts (those the production decision
    kept are counted too); ``outcome`` is the row's replay of ``resource`` ("time"
    or "memory"); ``goals`` which replay goals it meets against the scouts
    (:data:`GOALS`).
    """

    kept_tasks: int
    tasks: int
    resource: str
    outcome: ReplayOutcome
    goals: dict[str, bool]

    def to_dict(self) -> dict[str, Any]:
        """Return the row as JSON-ready values."""
        return {
            "kept_tasks": self.kept_tasks,
            "tasks": self.tasks,
            "resource": self.resource,
            "outcome": self.outcome.to_dict(),
            "goals": dict(self.goals),
        }


def _per_task(code: np.ndarray, n_tasks: int, values: np.ndarray) -> np.ndarray:
    out = np.zeros(n_tasks)
    np.add.at(out, code, values.astype(float))
    return out


def kept_by_hindsight(
    mine: JobOutcomes,
    scouts: JobOutcomes,
    code: np.ndarray,
    max_delay_share: float = MAX_DELAY_SHARE,
) -> np.ndarray:
    """Return, per task (numbered as :func:`task_index` numbers them), whether to
    keep its scouts.

    A task is worth scouting where the scouts fail fewer jobs or waste less in it,
    weighed relative to the scouts' totals. Those that add no bulk delay come
    first, then the rest by benefit per second of added delay, while the row's
    delay stays within ``max_delay_share`` of the scouts'.

    :param mine: the production row's figures per job.
    :param scouts: the scouts' figures per job (same jobs, same order).
    :param code: (n,) per job, its task's number (``task_index(task)[0]``).
    :param max_delay_share: the delay goal's share of the scouts' bulk delay.
    """
    n_tasks = mine.task_bulk_delay_s.size
    failed_scouts = _per_task(code, n_tasks, scouts.failed)
    wasted_scouts = _per_task(code, n_tasks, scouts.wasted_hours)
    benefit = (_per_task(code, n_tasks, mine.wasted_hours) - wasted_scouts) / max(
        float(wasted_scouts.sum()), 1e-9
    ) + (_per_task(code, n_tasks, mine.failed) - failed_scouts) / max(
        float(failed_scouts.sum()), 1.0
    )
    added = scouts.task_bulk_delay_s - mine.task_bulk_delay_s
    budget = max_delay_share * float(scouts.task_bulk_delay_s.sum()) - float(
        mine.task_bulk_delay_s.sum()
    )
    kept = np.zeros(n_tasks, dtype=bool)
    helps = np.flatnonzero(benefit > 0)
    free = helps[added[helps] <= 0]
    kept[free] = True
    paid = helps[added[helps] > 0]
    for t in paid[np.argsort(-benefit[paid] / added[paid], kind="stable")].tolist():
        if added[t] <= budget:
            kept[t] = True
            budget -= float(added[t])
    return kept


def _mixed(
    mine: JobOutcomes, scouts: JobOutcomes, code: np.ndarray, kept: np.ndarray
) -> JobOutcomes:
    """Return per job the scouts' figures where its task is kept, else ``mine``
    (per task for ``task_bulk_delay_s``, the one field kept per task)."""
    job = kept[code]
    return JobOutcomes(
        **{
            f.name: np.where(
                kept if f.name == "task_bulk_delay_s" else job,
                getattr(scouts, f.name),
                getattr(mine, f.name),
            )
            for f in fields(JobOutcomes)
        }
    )


def hindsight_row(
    replayed: TargetReplay,
    model: str,
    max_delay_share: float = MAX_DELAY_SHARE,
) -> HindsightRow:
    """Return ``model``'s row with the scouts kept on tasks chosen with hindsight.

    :param replayed: :func:`~pipelines.evaluation.trace.replay.replay_target`'s
        replay, ``model`` among its models.
    :param model: the model row (e.g. ``model:production``).
    :param max_delay_share: the delay goal's share of the scouts' bulk delay.
    """
    strategy = f"predictor ({model})"
    if strategy not in replayed.by_job:
        raise ValueError(
            f"The 'model' field must name a replayed model row "
            f"({sorted(replayed.applied)}). Got {model!r} instead."
        )
    mine, scouts = replayed.by_job[strategy], replayed.by_job["scouts"]
    code, order, starts, _ = task_index(np.asarray(replayed.jobs.task))
    kept = kept_by_hindsight(mine, scouts, code, max_delay_share)
    # The tasks the decision itself kept are counted too (their figures are the
    # scouts' either way).
    kept |= ~np.asarray(replayed.applied[model], dtype=bool)[order[starts]]
    outcome = _mixed(mine, scouts, code, kept).summed(HINDSIGHT, replayed.jobs.resource)
    goals = replay_goals(
        [*replayed.outcomes, outcome], HINDSIGHT, max_delay_share=max_delay_share
    )
    return HindsightRow(
        int(kept.sum()),
        int(kept.size),
        replayed.jobs.resource,
        outcome,
        {g: bool(goals[g]) for g in GOALS},
    )


def format_hindsight(target: str, model: str, row: HindsightRow) -> str:
    """Return :func:`hindsight_row` as one report line."""
    o = row.outcome
    time = row.resource == "time"
    wasted = o.wasted_core_hours if time else o.wasted_gb_hours
    unit = "core-h" if time else "GB-h"
    marks = goal_marks(row.goals)
    return (
        f"- hindsight ({target}): {model} with the scouts kept on {row.kept_tasks} "
        f"of {row.tasks} tasks chosen after they ran (within the delay goal) would "
        f"fail {o.failed_job_rate:.3f} of the jobs, waste {wasted:.4g} {unit} and "
        f"delay {o.mean_bulk_delay_hours:.2f} h per task ({marks}): "
        f"{_meaning(row)} (pipelines/evaluation/trace/hindsight.py)"
    )


def _meaning(row: HindsightRow) -> str:
    if all(row.goals[g] for g in GOALS[:3]):
        return "a per-task scouts choice could meet the goals with these values"
    return "this choice does not meet the goals with these values"


__all__ = [
    "HINDSIGHT",
    "HindsightRow",
    "format_hindsight",
    "hindsight_row",
    "kept_by_hindsight",
]
