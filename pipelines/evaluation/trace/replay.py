"""Replay a trace's test jobs under scouts, our predictor, the sizing peers, the
recency rules, the user's request and an oracle (see
:mod:`panda_predictor.core.replay.engine`).

PanDA re-measures every running task after ``rules.remeasure_after`` finished jobs
(5 and 100) with its own formulas, whatever was written at submission
(:mod:`panda_predictor.core.replay.panda_rules`), so every row below that starts a task
at once is re-measured that way, except "request (never re-measured)" and "oracle".
Strategies, one table row each:

- ``scouts``: PanDA as it is: the first ``rules.n_scouts`` jobs of a task are scouts
  asking for the user's request, the bulk waits for them and asks for PanDA's
  measurement of the finished scouts, then PanDA re-measures at 5 and 100.
- ``predictor (<model row>)``: a task the decision applies to (the run's ``applied``
  flags, else confidence >= threshold; a task's decision is its first job's) starts
  at once with the value written (``run.values[<model row>]`` where the run has it,
  else the predicted class's value); a task that kept its scouts runs as scouts.
  PanDA re-measures it too, unless the decision wrote the value ``...Fixed``
  (``run.fixed``; training chooses that per deployment, memory only), and where
  the decision marked the task (``run.early``, the decision's ``early_remeasure``:
  written the scouts' own first values, or beside a scouts-valued target) after
  :data:`~panda_predictor.core.replay.panda_rules.EARLY_REMEASURE_AFTER` (3)
  settled jobs (finished, or lost) as well, as its scouts would have been: the
  hook asks PanDA for that re-measurement
  (:mod:`panda_predictor.db.early_remeasure`), so the task's jobs 4 and 5 get the
  measurement a scouted task's bulk gets.
- ``peer (<method>)``: the sizing methods of the literature (Tovar et al. 2018,
  Witt et al. 2019), computed by the caller (``peers``): every task starts at once
  with the method's first request and a failed job retries at least at the method's
  retry request.
- ``rule (<baseline>)``: every task starts at once with a recency rule's value, so
  the table answers "is the model worth it over the rule?".
- ``request (never re-measured)``: every task starts at once with the user's
  request and keeps it (a bound: PanDA would re-measure it);
  ``request + PanDA re-measurement``: the same, re-measured as PanDA does.
- ``oracle``: every job asks for exactly what it used.

Every first request is capped at the user's request when there is one, and so is
every measurement: the trace's jobs never ran past it (the system kills them), and
it is known at submission. Where there is none, memory asks for the queue's default
(:data:`~panda_predictor.core.decide.cost_choice.DEFAULT_RAM_MB_PER_CORE`, what a PanDA
job without a ramCount gets) and time for the top class's value (no limit set).

:func:`difference_by_place` says where the production row and the scouts differ,
job by job: by a job's place in its task (the scouts' places, the jobs before
PanDA's first re-measurement, the rest), by its task's size, and by how the value
written compares with what the scouts would have asked for. It splits the very
replay the table shows (:class:`TargetReplay` keeps the scouts' and each predictor
row's figures per job), so its groups add up to those rows by construction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.decide.cost_choice import DEFAULT_RAM_MB_PER_CORE
from panda_predictor.core.replay.engine import (
    JobOutcomes,
    ReplayJobs,
    ReplayOutcome,
    ReplayRules,
)
from panda_predictor.core.replay.goals import goal_marks, replay_goals
from panda_predictor.core.replay.panda_rules import EARLY_REMEASURE_AFTER, early_points
from panda_predictor.core.replay.tasks import job_rank, task_size, tasks_from_bursts
from pipelines.evaluation.trace.target_run import REQUEST_OF, TargetRun

#: Which replay resource each trace target is.
RESOURCE = {"walltime": "time", "ramcount": "memory"}
#: What a job without a request asks for, per resource (the cost choice's
#: default): memory the queue's default; time the top class's value (absent).
NO_REQUEST = {"memory": DEFAULT_RAM_MB_PER_CORE}
#: Baseline rows that are not recency rules (the request rows replay the first).
_NOT_RULES = ("baseline:request",)
#: The request rows: every task starts at once with the user's request.
NEVER_REMEASURED = "request (never re-measured)"
REMEASURED = "request + PanDA re-measurement"


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
    return _first_job_decides(np.asarray(applied, dtype=bool), task)


def _first_job_decides(flags: np.ndarray, task: np.ndarray) -> np.ndarray:
    """Return, per job, the flag of its task's first job."""
    _, first = np.unique(task, return_index=True)
    per_task = pd.Series(flags[first], index=task[first])
    return per_task.reindex(task).to_numpy(dtype=bool)


def rule_names(run: TargetRun) -> list[str]:
    """Return the recency rule rows of ``run`` to replay as strategies."""
    return [
        n for n in run.predicted if n.startswith("baseline:") and n not in _NOT_RULES
    ]


def _first_values(run: TargetRun, model: str, ladder: np.ndarray) -> np.ndarray:
    """Return, per test row, the value ``model`` writes: concrete, else its class's."""
    value = ladder[run.predicted[model]]
    written = run.values.get(model)
    if written is not None:
        written = np.asarray(written, dtype=float)
        value = np.where(np.isfinite(written) & (written > 0), written, value)
    return value


def _remeasured(run: TargetRun, model: str, task: np.ndarray) -> np.ndarray:
    """Return, per job, whether PanDA re-measures what ``model`` wrote: everywhere
    but where the value was written ``...Fixed`` (its task's first job decides)."""
    fixed = run.fixed.get(model)
    if fixed is None:
        return np.ones(task.size, dtype=bool)
    return _first_job_decides(~np.asarray(fixed, dtype=bool), task)


def _early_points(run: TargetRun, model: str) -> np.ndarray | int:
    """Return per row after how many finished jobs the hook asks PanDA to
    re-measure the row's task under ``model`` (0: never; a task's first job
    decides, as for ``applied``)."""
    flags = run.early.get(model)
    return 0 if flags is None else early_points(flags)


def _peer_requests(
    name: str, pair: tuple[np.ndarray, np.ndarray], fallback: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return a peer's (first, retry) requests; no first value: the fallback."""
    first, retry = (np.asarray(v, dtype=float) for v in pair)
    if first.shape != fallback.shape or retry.shape != fallback.shape:
        raise ValueError(
            f"The peer '{name}' must give one first and one retry request per test "
            f"row ({fallback.shape}). Got {first.shape} and {retry.shape} instead."
        )
    first = np.where(np.isfinite(first) & (first > 0), first, fallback)
    retry = np.where(np.isfinite(retry) & (retry > 0), retry, 0.0)
    return first, retry


def trace_jobs(
    frame: pd.DataFrame,
    run: TargetRun,
    user_exe_key: np.ndarray,
    rules: ReplayRules | None = None,
) -> ReplayJobs:
    """Return the test jobs of ``run`` as every strategy of the replay shares them
    (tasks are bursts of one user-and-executable key; see :func:`replay_target`)."""
    rows = run.rows
    run_s = np.nan_to_num(
        np.maximum(frame["run_s"].to_numpy(dtype=float)[rows], 0.0), posinf=0.0
    )
    cores = frame["procs"].to_numpy(dtype=float)[rows]
    return ReplayJobs(
        resource=RESOURCE[run.target],
        task=tasks_from_bursts(frame["submit_s"].to_numpy()[rows], user_exe_key[rows]),
        used=np.maximum(run.actual, 1.0),
        run_s=run_s,
        cores=np.where(np.isfinite(cores) & (cores > 0), cores, 1.0),
        # A class whose training values were all 0 (jobs that did nothing) writes
        # 0; the replay asks for at least one unit, as it counts use (``used``).
        ladder=np.maximum(np.asarray(run.bins.values, dtype=float), 1.0),
        request=frame[REQUEST_OF[run.target]].to_numpy(dtype=float)[rows],
        rules=ReplayRules() if rules is None else rules,
        no_request=NO_REQUEST.get(RESOURCE[run.target]),
    )


@dataclass(frozen=True)
class TargetReplay:
    """One target's replay: every strategy's row, and the figures per job of the
    rows :func:`difference_by_place` breaks down.

    The scouts and each predictor row are replayed once, job by job, and their
    rows are those figures summed (:meth:`JobOutcomes.summed`): the breakdown
    splits the replay the table shows instead of replaying it a second time.

    :param jobs: the test jobs every strategy ran (:func:`trace_jobs`).
    :param outcomes: one row per strategy, in the table's order (module doc).
    :param by_job: per strategy ("scouts", "predictor (<model>)"), its figures
        per job; each sums to its row of ``outcomes``.
    :param applied: per model, per job, whether its task skipped its scouts (the
        decision the predictor row was replayed with).
    """

    jobs: ReplayJobs
    outcomes: list[ReplayOutcome]
    by_job: dict[str, JobOutcomes]
    applied: dict[str, np.ndarray]


def replay_target(
    frame: pd.DataFrame,
    run: TargetRun,
    user_exe_key: np.ndarray,
    models: list[str],
    threshold: float,
    *,
    rules: ReplayRules | None = None,
    peers: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> TargetReplay:
    """Replay each strategy (module doc) on one target's test jobs.

    :param frame: the trace's job frame (``submit_s``, ``run_s``, ``procs`` and the
        target's request column).
    :param run: the target's walk-forward predictions.
    :param user_exe_key: per frame row, the user-and-executable key of its task.
    :param models: model rows to replay (e.g. the arg-max and safety-aware rows).
    :param threshold: confidence needed when the run has no ``applied`` flags.
    :param rules: retry, maxAttempt and re-measurement rules (default
        :class:`ReplayRules`).
    :param peers: per sizing method, its (first request, retry request) per test
        row of ``run``, in the trace unit (NaN or 0: none).
    """
    jobs = trace_jobs(frame, run, user_exe_key, rules)
    task = jobs.task
    by_job = {"scouts": jobs.by_job()}
    applied: dict[str, np.ndarray] = {}
    for model in models:
        applied[model] = task_decision(run, model, task, threshold)
        by_job[f"predictor ({model})"] = jobs.by_job(
            _first_values(run, model, jobs.ladder),
            applied[model],
            _remeasured(run, model, task),
            early_remeasure=_early_points(run, model),
        )
    outcomes = [o.summed(name, jobs.resource) for name, o in by_job.items()]
    for name, pair in (peers or {}).items():
        first, retry = _peer_requests(name, pair, jobs.default)
        outcomes.append(
            jobs.started_at_once(f"peer ({name})", first, retry_request=retry)
        )
    for name in rule_names(run):
        value = jobs.ladder[run.predicted[name]]
        raw = run.raw.get(name)
        if raw is not None:
            raw = np.asarray(raw, dtype=float)
            value = np.where(np.isfinite(raw) & (raw > 0), raw, value)
        outcomes.append(jobs.started_at_once(f"rule ({name})", value))
    outcomes += [
        jobs.started_at_once(NEVER_REMEASURED, jobs.default, remeasure=False),
        jobs.started_at_once(REMEASURED, jobs.default),
        jobs.exact("oracle"),
    ]
    return TargetReplay(jobs, outcomes, by_job, applied)


#: How a job's first value compares with what its scouts would have asked for
#: (:attr:`ReplayJobs.default`: the request, else the default), in the breakdown
#: of :func:`difference_by_place`; "kept scouts": its task ran them.
RELATIONS = ("kept scouts", "below", "same", "above")
#: Task sizes (jobs) the breakdown by size tells apart: upper bounds.
SIZE_BOUNDS = (1, 3, 5, 100)


@dataclass(frozen=True)
class DifferenceRow:
    """One group of jobs of :func:`difference_by_place`: how many, what failed and
    what was wasted under the model and under the scouts (core- or GB-hours)."""

    group: str
    relation: str
    jobs: int
    failed: int
    scouts_failed: int
    wasted_hours: float
    scouts_wasted_hours: float

    def to_dict(self) -> dict[str, Any]:
        """Return the row as a plain mapping."""
        return asdict(self)


def place_names(rules: ReplayRules) -> tuple[str, ...]:
    """Return the names of a job's places in its task that PanDA treats apart: the
    scouts' places, those before the first re-measurement, and the rest."""
    n = rules.n_scouts
    first = rules.remeasure_after[0] if rules.remeasure_after else n
    names = [f"jobs 1-{n}" if n > 1 else "job 1"]
    if first > n:
        names.append(f"jobs {n + 1}-{first}" if first > n + 1 else f"job {first}")
    names.append(f"jobs {max(first, n) + 1}+")
    return tuple(names)


def _places(rank: np.ndarray, rules: ReplayRules) -> np.ndarray:
    """Return, per job, the index of its place in :func:`place_names`."""
    n = rules.n_scouts
    first = rules.remeasure_after[0] if rules.remeasure_after else n
    place = np.where(rank < n, 0, 1)
    if first > n:
        place = np.where(rank >= first, 2, place)
    return place


def _size_names() -> tuple[str, ...]:
    """Return the names of the task sizes of :data:`SIZE_BOUNDS`, and one above."""
    names, low = [], 1
    for high in SIZE_BOUNDS:
        jobs = f"{low} job" + ("s" if low > 1 else "")
        names.append(
            f"tasks of {jobs}" if high == low else f"tasks of {low}-{high} jobs"
        )
        low = high + 1
    return (*names, f"tasks of {low}+ jobs")


def difference_by_place(
    replayed: TargetReplay, run: TargetRun, model: str
) -> dict[str, list[DifferenceRow]]:
    """Return where ``model``'s replay differs from the scouts', job by job.

    The jobs of ``replayed``'s rows ``scouts`` and ``predictor (<model>)``, with
    their figures as replayed there, grouped two ways: ``"place"``, by a job's place
    in its task (:func:`place_names`: the scouts' places, where a task that skipped
    them runs its written value and a scouted one its request or default; the
    places before PanDA's first re-measurement, where the scouted task runs PanDA's
    measurement of its scouts and the other still its written value; the rest,
    re-measured both ways) and by how the written value compares with the scouts'
    first value (:data:`RELATIONS`); ``"size"``, by the size of the job's task
    (known only afterwards: an explanation, not an input) and the same relation.

    :param replayed: :func:`replay_target`'s replay, ``model`` among its models.
    :param run: the run it replayed (for the values ``model`` wrote).
    :param model: the model row to compare with the scouts.
    """
    strategy = f"predictor ({model})"
    if strategy not in replayed.by_job:
        raise ValueError(
            f"The 'model' field must name a replayed model row "
            f"({sorted(replayed.applied)}). Got {model!r} instead."
        )
    jobs = replayed.jobs
    mine, scouts = replayed.by_job[strategy], replayed.by_job["scouts"]
    applied = replayed.applied[model]
    value = _first_values(run, model, jobs.ladder)
    asked = np.maximum(np.minimum(value, jobs.cap), 1.0)
    default = jobs.default
    same = np.isclose(asked, default, rtol=1e-9, atol=1e-9)
    relation = np.where(~applied, 0, np.where(same, 2, np.where(asked < default, 1, 3)))
    size = task_size(jobs.task)
    by_size = np.searchsorted(np.asarray(SIZE_BOUNDS), size, side="left")
    groups = {
        "place": (_places(job_rank(jobs.task), jobs.rules), place_names(jobs.rules)),
        "size": (by_size, _size_names()),
    }
    out: dict[str, list[DifferenceRow]] = {}
    for kind, (index, names) in groups.items():
        rows = []
        for g, name in enumerate(names):
            for r, said in enumerate(RELATIONS):
                sel = (index == g) & (relation == r)
                if not sel.any():
                    continue
                rows.append(
                    DifferenceRow(
                        group=name,
                        relation=said,
                        jobs=int(sel.sum()),
                        failed=int(mine.failed[sel].sum()),
                        scouts_failed=int(scouts.failed[sel].sum()),
                        wasted_hours=float(mine.wasted_hours[sel].sum()),
                        scouts_wasted_hours=float(scouts.wasted_hours[sel].sum()),
                    )
                )
        out[kind] = rows
    return out


def format_difference(
    target: str, model: str, rows: dict[str, list[DifferenceRow]]
) -> str:
    """Return :func:`difference_by_place`'s groups as Markdown tables."""
    unit = "core-h" if RESOURCE.get(target) == "time" else "GB-h"
    heads = {"place": "place in its task", "size": "task size"}
    lines = [f"### replay: {target}, where {model} and the scouts differ", ""]
    for kind, groups in rows.items():
        lines += [
            f"| {heads.get(kind, kind)} | written value vs the scouts' first value | "
            f"jobs | failed jobs (ours / scouts') | extra failed jobs | "
            f"extra wasted {unit} |",
            "|---" * 6 + "|",
        ]
        for row in groups:
            lines.append(
                f"| {row.group} | {row.relation} | {row.jobs} | {row.failed} / "
                f"{row.scouts_failed} | {row.failed - row.scouts_failed:+d} | "
                f"{row.wasted_hours - row.scouts_wasted_hours:+.4g} |"
            )
        lines.append("")
    lines.append(
        "Same jobs as the replay table above, each job counted once per table. "
        "The written value is the job's own (each job of a log is predicted at its "
        "submission; capped at the request), against what its scouts would ask for "
        "(the request, else the default); a scouted task's jobs after its scouts "
        "ask for PanDA's "
        "measurement of them instead, a task that skipped them its written value "
        "until PanDA re-measures it. Task sizes are known only after the task: an "
        "explanation, not an input."
    )
    return "\n".join(lines)


def _marks(outcomes: list[ReplayOutcome], strategy: str) -> str:
    """Return the goal marks of ``strategy`` vs scouts ("-" for the references)."""
    if strategy in ("scouts", "oracle") or "scouts" not in {
        o.strategy for o in outcomes
    }:
        return "-"
    goals = replay_goals(outcomes, strategy)
    return goal_marks(goals)


def format_replay(
    target: str, outcomes: list[ReplayOutcome], rules: ReplayRules | None = None
) -> str:
    """Return a Markdown table of replay outcomes, with the goal marks vs scouts.

    ``rules`` are those the outcomes were replayed with (default
    :class:`ReplayRules`), named in the table's note.
    """
    rules = ReplayRules() if rules is None else rules
    points = " and ".join(str(p) for p in rules.remeasure_after) or "no"
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
        "Goals, in order: failed jobs <= scouts', wasted core- and GB-hours <= "
        "scouts', bulk delay <= 20 % of scouts', and not dominated (no other row "
        "but the oracle and the predictor's own fails fewer jobs and wastes less at "
        "no more bulk delay). Every row that starts a task at once is re-measured "
        f"by PanDA after {points} finished jobs, except '{NEVER_REMEASURED}' and "
        "'oracle', and a predictor's task written the scouts' own first values "
        f"after {EARLY_REMEASURE_AFTER} too (the hook's early re-measurement asks "
        f"PanDA for it); a job is lost after {rules.max_attempts} failed attempts.",
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
        "not dominated "
        + (
            "holds"
            if g["not_dominated"]
            else f"fails (dominated by {', '.join(g['dominated_by'])})"
        ),
    ]
    verdict = "all goals met" if g["all"] else "NOT all goals met"
    return f"{target}, {strategy} vs scouts: {'; '.join(parts)} ({verdict})"
