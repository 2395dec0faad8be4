"""Replay a trace's test jobs under scouts, our predictor, the recency rules, the
user's request and an oracle (see :mod:`panda_predictor.core.replay`).

Strategies, one table row each:

- ``scouts``: PanDA as it is: the first jobs of a task are scouts asking for the
  user's request, the bulk waits for them and asks for their largest use + 10 %;
  PanDA's second look re-estimates the task after a few more finished jobs.
- ``predictor (<model row>)``: a task the production decision applies to (the run's
  ``applied`` flags, else confidence >= threshold on its first job) starts at once
  with the predicted class's value; the others keep their scouts, as above.
- ``predictor (<model row>+refine)``: the same, and once an applied task's first
  ``rules.refine_jobs`` jobs finished, the rest of it asks for their largest use +
  10 % (never below ``rules.refine_floor`` x the prediction): no job waits.
- ``rule (<baseline>)``: every task starts at once with a recency rule's value, so
  the table answers "is the model worth it over the rule?".
- ``user request`` and ``oracle`` (every job asks for exactly what it used).

Every request is capped at the user's request when there is one: the trace's jobs
never ran past it (the system kills them), and it is known at submission.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from panda_predictor.core.replay import (
    ReplayOutcome,
    ReplayRules,
    replay,
    scout_plan,
    tasks_from_bursts,
)
from panda_predictor.core.replay_goals import GOALS, replay_goals
from pipelines.trace.walk_forward import REQUEST_OF, TargetRun

#: Which replay resource each trace target is.
RESOURCE = {"walltime": "time", "ramcount": "memory"}
#: Baseline rows that are not recency rules ("user request" replays the first).
_NOT_RULES = ("baseline:request",)


def task_decision(
    run: TargetRun, model: str, task: np.ndarray, threshold: float
) -> np.ndarray:
    """Return, per job, whether its task skips scouts under ``model``.

    A task's decision is its first job's: the run's ``applied`` flag (the production
    decision) when the run has one for ``model``, else confidence >= ``threshold``.
    """
    applied = getattr(run, "applied", {}).get(model)
    if applied is None:
        applied = np.asarray(run.confidence[model]) >= threshold
    _, first = np.unique(task, return_index=True)
    per_task = pd.Series(np.asarray(applied, dtype=bool)[first], index=task[first])
    return per_task.reindex(task).to_numpy(dtype=bool)


def rule_names(run: TargetRun) -> list[str]:
    """Return the recency rule rows of ``run`` to replay as strategies."""
    return [
        n for n in run.predicted if n.startswith("baseline:") and n not in _NOT_RULES
    ]


def replay_target(
    frame: pd.DataFrame,
    run: TargetRun,
    user_exe_key: np.ndarray,
    models: list[str],
    threshold: float,
    *,
    rules: ReplayRules | None = None,
    refine: bool = True,
) -> list[ReplayOutcome]:
    """Return the outcome of each strategy (module doc) for one target's test jobs.

    :param frame: the trace's job frame (``submit_s``, ``run_s``, ``procs`` and the
        target's request column).
    :param run: the target's walk-forward predictions.
    :param user_exe_key: per frame row, the user-and-executable key of its task.
    :param models: model rows to replay (e.g. the arg-max and safety-aware rows).
    :param threshold: confidence needed when the run has no ``applied`` flags.
    :param rules: retry and re-estimate rules (default :class:`ReplayRules`).
    :param refine: also replay each model row with "predict, then refine".
    """
    rules = ReplayRules() if rules is None else rules
    rows = run.rows
    used = np.maximum(run.actual, 1.0)
    run_s = np.nan_to_num(
        np.maximum(frame["run_s"].to_numpy(dtype=float)[rows], 0.0), posinf=0.0
    )
    cores = frame["procs"].to_numpy(dtype=float)[rows]
    cores = np.where(np.isfinite(cores) & (cores > 0), cores, 1.0)
    task = tasks_from_bursts(frame["submit_s"].to_numpy()[rows], user_exe_key[rows])
    # A class whose training values were all 0 (jobs that did nothing) writes 0;
    # the replay asks for at least one unit, as it counts use (``used``).
    ladder = np.maximum(np.asarray(run.bins.values, dtype=float), 1.0)
    request = frame[REQUEST_OF[run.target]].to_numpy(dtype=float)[rows]
    given = np.isfinite(request) & (request > 0)
    cap = np.where(given, request, np.inf)
    default = np.where(given, request, ladder[-1])
    scout_req, scout_delay = scout_plan(
        task, used, run_s, default, n_scouts=rules.n_scouts, margin=rules.margin
    )
    scout_req = np.minimum(scout_req, cap)
    sizes = pd.Series(task).map(pd.Series(task).value_counts()).to_numpy()
    scout_look = np.where(
        (sizes > rules.n_scouts) & (rules.second_look_jobs > 0),
        rules.n_scouts + rules.second_look_jobs,
        0,
    )
    common = dict(
        resource=RESOURCE[run.target],
        task=task,
        used=used,
        run_s=run_s,
        cores=cores,
        ladder=ladder,
        cap=cap,
        rules=rules,
    )
    outcomes = [
        replay(
            "scouts",
            requested=scout_req,
            bulk_delay_s=scout_delay,
            reestimate_after=scout_look,
            **common,
        )
    ]
    for model in models:
        applied = task_decision(run, model, task, threshold)
        predicted = np.minimum(ladder[run.predicted[model]], cap)
        requested = np.where(applied, predicted, scout_req)
        delay = np.where(applied, 0.0, scout_delay)
        outcomes.append(
            replay(
                f"predictor ({model})",
                requested=requested,
                bulk_delay_s=delay,
                reestimate_after=np.where(applied, rules.skipped_look_jobs, scout_look),
                **common,
            )
        )
        if refine:
            outcomes.append(
                replay(
                    f"predictor ({model}+refine)",
                    requested=requested,
                    bulk_delay_s=delay,
                    reestimate_after=np.where(applied, rules.refine_jobs, scout_look),
                    reestimate_floor=np.where(applied, rules.refine_floor, 0.0),
                    **common,
                )
            )
    for name in rule_names(run):
        value = ladder[run.predicted[name]]
        raw = run.raw.get(name)
        if raw is not None:
            raw = np.asarray(raw, dtype=float)
            value = np.where(np.isfinite(raw) & (raw > 0), raw, value)
        outcomes.append(
            replay(
                f"rule ({name})",
                requested=np.minimum(value, cap),
                reestimate_after=np.full(task.size, rules.skipped_look_jobs),
                **common,
            )
        )
    return [
        *outcomes,
        replay("user request", requested=default, **common),
        replay("oracle", requested=used, **common),
    ]


def _marks(outcomes: list[ReplayOutcome], strategy: str) -> str:
    """Return the goal marks of ``strategy`` vs scouts ("-" for the references)."""
    if strategy in ("scouts", "oracle") or "scouts" not in {
        o.strategy for o in outcomes
    }:
        return "-"
    goals = replay_goals(outcomes, strategy)
    return "".join("✓" if goals[g] else "✗" for g in GOALS)


def format_replay(target: str, outcomes: list[ReplayOutcome]) -> str:
    """Return a Markdown table of replay outcomes, with the goal marks vs scouts."""
    lines = [
        f"### replay: {target}",
        "",
        "| strategy | failed jobs | lost jobs | retries/job | lost core-h | "
        "lost GB-h | wasted core-h | wasted GB-h | bulk delay (h/task) | "
        "retry delay (h/job) | goals |",
        "|---" * 11 + "|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.strategy} | {o.failed_job_rate:.3f} | {o.lost_job_rate:.3f} | "
            f"{o.retries_per_job:.3f} | {o.lost_core_hours:.4g} | "
            f"{o.lost_gb_hours:.4g} | {o.wasted_core_hours:.4g} | "
            f"{o.wasted_gb_hours:.4g} | {o.mean_bulk_delay_hours:.3f} | "
            f"{o.mean_retry_delay_hours:.3f} | {_marks(outcomes, o.strategy)} |"
        )
    lines += [
        "",
        "Goals vs scouts, in order: failed jobs <= scouts', wasted core- and GB-hours "
        "<= scouts', bulk delay <= 20 % of scouts'.",
    ]
    return "\n".join(lines)


def format_goals(target: str, outcomes: list[ReplayOutcome], strategy: str) -> str:
    """Return one line saying which goals ``strategy`` meets against scouts."""
    g = replay_goals(outcomes, strategy)
    f = g["figures"]

    def said(goal: str) -> str:
        return "holds" if g[goal] else "fails"

    parts = [
        f"failed jobs {f['failed_job_rate'][0]:.3f} <= "
        f"{f['failed_job_rate'][1]:.3f} {said('failed_jobs')}",
        "wasted core-h/GB-h "
        f"{f['wasted_core_hours'][0]:.4g}/{f['wasted_gb_hours'][0]:.4g} <= "
        f"{f['wasted_core_hours'][1]:.4g}/{f['wasted_gb_hours'][1]:.4g} "
        f"{said('waste')}",
        f"bulk delay {f['mean_bulk_delay_hours'][0]:.3f} h <= "
        f"{f['mean_bulk_delay_hours'][1]:.3f} h {said('bulk_delay')}",
    ]
    verdict = "all goals met" if g["all"] else "NOT all goals met"
    return f"{target}, {strategy} vs scouts: {'; '.join(parts)} ({verdict})"
