"""Replay a trace's test jobs under scouts, our predictor, the user's request and an
oracle (see :mod:`panda_predictor.core.replay`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from panda_predictor.core.replay import (
    ReplayOutcome,
    replay,
    scout_plan,
    tasks_from_bursts,
)
from pipelines.trace.features import REQUEST_OF
from pipelines.trace.walk_forward import TargetRun

#: Which replay resource each trace target is.
RESOURCE = {"walltime": "time", "ramcount": "memory"}


def replay_target(
    frame: pd.DataFrame,
    run: TargetRun,
    user_exe_key: np.ndarray,
    models: list[str],
    threshold: float,
) -> list[ReplayOutcome]:
    """Return the outcome of each strategy for one target's test jobs.

    One ``predictor (<model>)`` strategy per name in ``models`` (e.g. the arg-max
    and the safety-aware rows).

    A task whose first job's model confidence is below ``threshold`` keeps its
    scouts (the predictor's ``kept_scouts`` fallback); the others start at once
    with the predicted class's value (capped at the user's request, if any).
    """
    rows = run.rows
    resource = RESOURCE[run.target]
    used = np.maximum(run.actual, 1.0)
    run_s = np.maximum(frame["run_s"].to_numpy(dtype=float)[rows], 0.0)
    run_s = np.nan_to_num(run_s)
    cores = frame["procs"].to_numpy(dtype=float)[rows]
    cores = np.where(np.isfinite(cores) & (cores > 0), cores, 1.0)
    task = tasks_from_bursts(frame["submit_s"].to_numpy()[rows], user_exe_key[rows])
    ladder = np.asarray(run.bins.values)
    request = frame[REQUEST_OF[run.target]].to_numpy(dtype=float)[rows]
    default = np.where(np.isfinite(request) & (request > 0), request, ladder[-1])
    scout_req, scout_delay = scout_plan(task, used, run_s, default)
    first = np.zeros(rows.size, dtype=bool)
    _, first_idx = np.unique(task, return_index=True)
    first[first_idx] = True
    common = dict(
        resource=resource, task=task, used=used, run_s=run_s, cores=cores, ladder=ladder
    )
    outcomes = [
        replay("scouts", requested=scout_req, bulk_delay_s=scout_delay, **common)
    ]
    for model in models:
        predicted = ladder[run.predicted[model]]
        task_conf = pd.Series(run.confidence[model][first], index=task[first])
        keep = task_conf.reindex(task).to_numpy() < threshold
        # A job never runs longer than its requested time (the system kills it), so
        # a prediction above the user's request is capped at it: known at submission.
        capped = np.where(
            np.isfinite(request) & (request > 0),
            np.minimum(predicted, request),
            predicted,
        )
        outcomes.append(
            replay(
                f"predictor ({model})",
                requested=np.where(keep, scout_req, capped),
                bulk_delay_s=np.where(keep, scout_delay, 0.0),
                **common,
            )
        )
    return [
        *outcomes,
        replay("user request", requested=default, **common),
        replay("oracle", requested=used, **common),
    ]


def format_replay(target: str, outcomes: list[ReplayOutcome]) -> str:
    """Return a Markdown table of replay outcomes."""
    lines = [
        f"### replay: {target}",
        "",
        "| strategy | failed jobs | lost core-h | wasted core-h | wasted GB-h | "
        "bulk delay (h/task) | retry delay (h/job) |",
        "|---" * 7 + "|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.strategy} | {o.failed_job_rate:.3f} | {o.lost_core_hours:.4g} | "
            f"{o.wasted_core_hours:.4g} | {o.wasted_gb_hours:.4g} | "
            f"{o.mean_bulk_delay_hours:.3f} | {o.mean_retry_delay_hours:.3f} |"
        )
    return "\n".join(lines)
