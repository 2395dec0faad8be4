"""Replay the served decision on labelled tasks: what each task's values realize.

The cost choice prices values by *expected* cost under the served distribution
(:mod:`panda_predictor.core.decide.cost_choice`). On tasks whose labels are known the
same decision can be scored by what it *realizes*: the true label value of each target
is taken as the task's use, and the written value costs what
:func:`~panda_predictor.core.decide.cost_choice.job_cost` says it costs for that use
(its spare part, or its failed attempts and their retries, plus
:attr:`~panda_predictor.core.decide.cost_choice.CostSettings.failure_cost` per failed
attempt). A task that keeps its scouts pays what its scouts realize: their first
jobs ask for the default (the request, else the cost choice's default), and the bulk
waits one job run for them (``delay_price``): :func:`replay_decision`.

The replay goals are judged job by job instead (:func:`replay_bursts`): the tasks
are replayed as the jobs of bursts (one user and transformation, created less than
an hour apart) under PanDA's rules, retries, maxAttempt and re-measurement after 5
and 100 finished jobs (:class:`~panda_predictor.core.replay.engine.ReplayJobs`), the
same engine the benchmark's headline table runs on job logs. In a job log each task is
one job; on PanDA's own history a task stands for one job of its burst, which
leaves out the spread of use between a task's own jobs (its label is already
PanDA's measurement of them).

The delay prices' tuning (:mod:`pipelines.training.cost_tuning`, on the validation
part) and the gate's evidence (:mod:`pipelines.retraining.gate_evidence`, on the test
part) run the decision through here, so they judge the decision that serves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from panda_predictor.core.bins import TargetBins
from panda_predictor.core.decide.cost_choice import (
    KIND_OF,
    MEMORY,
    CostChooser,
    job_cost,
)
from panda_predictor.core.decide.scout_policy import APPLIED
from panda_predictor.core.features.task_features import HOOK_COLUMNS
from panda_predictor.core.replay.engine import (
    JobOutcomes,
    ReplayJobs,
    ReplayRules,
)
from panda_predictor.core.replay.panda_rules import early_points
from panda_predictor.core.replay.tasks import tasks_from_bursts
from panda_predictor.serving.bundle import Bundle
from panda_predictor.serving.classified import Classified
from panda_predictor.serving.predictor import Predictor


def priced_targets(bundle: Bundle, tasks: pd.DataFrame) -> list[str]:
    """Return the bundle's targets a wrong value costs for, labelled in ``tasks``."""
    return [t for t in bundle.models if KIND_OF.get(t) is not None and t in tasks]


def labelled_parts(
    predictor: Predictor, tasks: pd.DataFrame, history: pd.DataFrame
) -> Classified:
    """Return the served classification of labelled ``tasks``, as the hook sees them.

    Only the hook's columns are passed on, so no label can leak into the features.
    """
    features = tasks[[c for c in HOOK_COLUMNS if c in tasks]]
    return predictor.classified(features, history)


#: Used as a job's run time where its task has no walltime label (memory waste is
#: counted in GB-hours, so a run time weighs every job).
DEFAULT_RUN_S = 3600.0


def replay_jobs(
    tasks: pd.DataFrame,
    target: str,
    request: np.ndarray | None,
    bins: TargetBins,
    rules: ReplayRules | None = None,
    no_request: float | None = None,
) -> ReplayJobs:
    """Return labelled ``tasks`` as the jobs of a replay of ``target``.

    Each task is one job, as a job log's are; its PanDA "task" is its burst: the
    tasks of one user and transformation created less than an hour apart
    (:func:`~panda_predictor.core.replay.engine.tasks_from_bursts`), replayed in
    creation order under PanDA's rules. A job uses its label value; its run time is the
    ``walltime`` label where known (:data:`DEFAULT_RUN_S` otherwise), its cores
    ``actualcorecount`` where a job log recorded them, else ``corecount`` (1 where
    neither is known). Pass only tasks whose ``target`` label is known. A task
    without a request asks for ``no_request`` (the cost choice's
    :attr:`~panda_predictor.core.decide.cost_choice.CostChooser.default_value`; None:
    the top class's value).
    """
    n = len(tasks)
    created = pd.to_datetime(tasks["creationdate"]).to_numpy(dtype="datetime64[ns]")
    seconds = (created - created.min()) / np.timedelta64(1, "s") if n else created
    key = (
        tasks["username"].astype(object).fillna("").astype(str)
        + "\x00"
        + tasks["transpath"].astype(object).fillna("").astype(str)
    ).to_numpy()
    run_s = (
        tasks["walltime"].to_numpy(dtype=float)
        if "walltime" in tasks
        else np.full(n, np.nan)
    )
    cores = tasks["corecount"].to_numpy(dtype=float)
    if "actualcorecount" in tasks:
        actual = tasks["actualcorecount"].to_numpy(dtype=float)
        cores = np.where(np.isfinite(actual) & (actual > 0), actual, cores)
    use = tasks[target].to_numpy(dtype=float)
    return ReplayJobs(
        resource="memory" if KIND_OF[target] == MEMORY else "time",
        task=tasks_from_bursts(np.asarray(seconds, dtype=float), key),
        used=np.maximum(use, 1.0),
        run_s=np.where(np.isfinite(run_s) & (run_s > 0), run_s, DEFAULT_RUN_S),
        cores=np.where(np.isfinite(cores) & (cores > 0), cores, 1.0),
        ladder=np.maximum(np.asarray(bins.values, dtype=float), 1.0),
        request=np.full(n, np.nan) if request is None else np.asarray(request, float),
        rules=ReplayRules() if rules is None else rules,
        no_request=no_request,
    )


def short_share(written: np.ndarray, truth: np.ndarray) -> float:
    """Return the share of tasks with a known truth whose written value is below it.

    0 when no task has a known truth (no value can have been too little).
    """
    known = np.isfinite(truth)
    return float(np.mean(written[known] < truth[known])) if known.any() else 0.0


def realized_cost(
    chooser: CostChooser, value: np.ndarray, use: np.ndarray, least_run: float
) -> np.ndarray:
    """Return per task what writing ``value`` costs when the job uses ``use``.

    In job runs, failed attempts included. For time one job run is the use itself,
    at least ``least_run`` (the lowest class's upper edge): a label in the lowest
    class is rounded (a walltime of 0 means less than an hour of CPU), so its own
    value does not measure the job's length.
    """
    assert chooser.kind is not None  # only priced targets are replayed
    scale = np.maximum(use, least_run)
    cost, failures = job_cost(
        chooser.kind, value, use, scale, chooser.ladder, chooser.settings
    )
    return cost + chooser.settings.failure_cost * failures


@dataclass(frozen=True)
class Replay:
    """Per task what the served decision realized on labelled tasks.

    ``applied`` whether the task skipped its scouts; ``cost`` what it realized in
    job runs (applied: its written values; kept: its scouts); ``scouts_cost``
    what it would have realized had every task run its scouts.
    """

    applied: np.ndarray
    cost: np.ndarray
    scouts_cost: np.ndarray


def replay_decision(
    predictor: Predictor,
    parts: Classified,
    decided: dict[str, np.ndarray],
    tasks: pd.DataFrame,
) -> Replay:
    """Return what ``decided`` (the predictor's decision on ``parts``) realizes.

    ``tasks`` hold the true label value of each priced target (NaN: unknown; such
    a target then costs nothing either way, so both sides stay paired).
    """
    applied = np.asarray(decided["decision"]) == APPLIED
    n = len(applied)
    requests = predictor.requests(parts)
    scouts = np.full(n, predictor.policy.settings.delay_price)
    written_cost = np.zeros(n)
    for t in priced_targets(predictor.bundle, tasks):
        chooser = predictor.policy.choosers[t]
        truth = tasks[t].to_numpy(dtype=float)
        known = np.isfinite(truth)
        use = np.where(known, truth, 0.0)
        request = requests.get(t, np.full(n, np.nan))
        has_request = np.isfinite(request) & (request > 0)
        default = np.where(has_request, request, chooser.default_value)
        written = np.asarray(decided[f"{t}_value"], dtype=float)
        edges = predictor.bundle.bins[t].edges
        least = float(edges[0]) if edges else 0.0
        realized = realized_cost(chooser, default, use, least)
        scouts = scouts + np.where(known, realized, 0.0)
        realized = realized_cost(chooser, written, use, least)
        written_cost = written_cost + np.where(known, realized, 0.0)
    cost = np.where(applied, written_cost, scouts)
    return Replay(applied, cost, scouts)


@dataclass(frozen=True)
class BurstReplay:
    """Per priced target, the served decision and the scouts replayed job by job.

    The tasks are replayed as the jobs of bursts under PanDA's rules
    (:func:`replay_jobs`), as the benchmark's headline table replays a job log;
    ``known`` marks the tasks whose label is known (the only ones replayed), and
    ``served`` / ``scouts`` hold one row per known task, in task order.
    """

    known: dict[str, np.ndarray]
    served: dict[str, JobOutcomes]
    scouts: dict[str, JobOutcomes]


def replay_bursts(
    predictor: Predictor,
    parts: Classified,
    decided: dict[str, np.ndarray],
    tasks: pd.DataFrame,
) -> BurstReplay:
    """Return the decision ``decided`` and the scouts replayed on labelled ``tasks``."""
    applied = np.asarray(decided["decision"]) == APPLIED
    requests = predictor.requests(parts)
    early = early_points(decided["early_remeasure"])
    known, served, scouts = {}, {}, {}
    for t in priced_targets(predictor.bundle, tasks):
        rows = np.isfinite(tasks[t].to_numpy(dtype=float))
        request = requests.get(t)
        jobs = replay_jobs(
            tasks[rows],
            t,
            None if request is None else request[rows],
            predictor.bundle.bins[t],
            no_request=predictor.policy.choosers[t].default_value,
        )
        value = np.asarray(decided[f"{t}_value"], dtype=float)[rows]
        known[t] = rows
        remeasure = t not in predictor.fixed_targets  # a Fixed value is kept
        served[t] = jobs.by_job(
            value, applied[rows], remeasure, early_remeasure=early[rows]
        )
        scouts[t] = jobs.by_job()
    return BurstReplay(known, served, scouts)
