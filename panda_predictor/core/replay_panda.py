"""PanDA's own reactions a replay must reproduce: memory retries and re-measurements.

What a wrong request costs depends on what PanDA does next, so the replay follows
panda-server's code (PanDAWMS/panda-server, read for these facts; the code here is
our own).

**Memory retries.** ``pandaserver/taskbuffer/retryModule.py``
(``apply_retrial_rules``) answers a failed job whose error matches an active
``increase_memory`` rule (tables RETRYERRORS / RETRYACTIONS) by calling
``increaseRamLimitJobJEDI(job, job.minRamCount, jediTaskID)``
(``pandaserver/taskbuffer/db_proxy_mods/task_event_module.py``), which:

1. takes the job's request per core: ``minRamCount`` with the memory compensation
   rolled back (``JobUtils.decompensate_ram_count``), minus the task's
   baseRamCount, divided by coreCount for ``MBPerCore`` tasks;
2. counts the task's master input files by their ramCount *before* recording this
   failure: ``total`` files (done or not), ``above`` those whose ramCount is above
   the task's ramCount, ``max_task`` the largest file ramCount;
3. if the unit is not ``MBPerCoreFixed`` and ``above / total > 0.3``, raises the
   whole task instead (``increaseRamLimitJEDI``) with ``minimum = max_task - 1`` if
   ``max_task`` exceeds the job's request, else the job's request: unless the task's
   ramCount is already above ``minimum`` or at least 8000, it becomes the first of
   1000, 2000, 3000, 4000, 6000, 8000 MB strictly above ``max(task ramCount,
   minimum)`` (8000 if none is) and the task's resource type is reset (it may move
   to high-memory queues). The job's own files are left alone: its retry, like
   every later job, asks for the new task value;
4. otherwise, unless the job's request is already 8000 or more, gives the job's
   files the first step strictly above the job's request (2000 -> 3000,
   2500 -> 3000, 6000 -> 8000), unless the task's ramCount is above that step.

A job at 8000 MB per core or more gets nothing more: it fails the same way until its
maxAttempt. The replay counts it *lost* after that attempt (PanDA would lose a few
more attempts: a lower bound). ``increase_memory_xtimes`` (SPLITRULE ``RX/RY/RZ``)
is another action, not replayed.

**Time limits.** The retry module's ``increase_cputime`` action calls
``requestTaskParameterRecalculation``, which sets the task's ``walltimeUnit`` to NULL
(at most once per 30 minutes) so that JEDI re-measures the task from its finished
jobs. It does not step the failed job's limit, so the replay keeps a simple,
documented rule for time: retry one class up, above the top class double.

**Re-measurement (the second look).** panda-docs ("Dynamic Optimization of Task
Parameters", ``docs/source/advanced/scouts.rst``) says the optimisation runs twice:
when half the scouts finished and when the first 100 jobs finished after the
avalanche. In panda-server's ``db_proxy_mods/task_complex_module.py``,
``prepareTasksToBeFinished_JEDI`` avalanches a scouting task once 5/10 of its scout
jobs finished, and re-measures a *running* task whose ``walltimeUnit`` is NULL as
soon as one of its jobs finished (checked every 10 minutes);
``setScoutJobDataToTasks_JEDI``, run by JEDI's watchdog
(``TypicalWatchDogBase.doActionToSetScoutJobData``, "set scout job data w/o
scouts"), does the same for running tasks whose ``walltimeUnit`` is NULL once 5 of
their jobs are done (``T_TASK.total_done_jobs >= 5``). The measurement
(``task_utils_module.getScoutJobData_JEDI``) uses all the task's finished jobs (up to
1000) and overwrites ramCount, cpuTime, walltime, ... So a task that skipped its
scouts *is* looked at by PanDA after its first finished jobs, but only while its
``walltimeUnit`` is NULL: panda-predictor's refiner writes ``walltime`` /
``walltimeUnit`` when it predicts walltime, which turns that path off. The stored
sources do not show where the 100-job look of a scouted task is triggered; the docs
say it happens.

Pure Python and numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Memory steps of panda-server's ``increase_memory`` retries, MB per core.
PANDA_RAM_STEPS_MB: tuple[float, ...] = (1000.0, 2000.0, 3000.0, 4000.0, 6000.0, 8000.0)
#: Share of a task's files above the task's ramCount that makes PanDA raise the task.
TASK_RAISE_FRACTION = 0.3
#: Scout jobs per task (PanDA sends about 10; trace "tasks" are smaller).
DEFAULT_N_SCOUTS = 3
#: Margin an estimate adds over the largest use (PanDA: 10 % on RAM).
DEFAULT_SCOUT_MARGIN = 0.10
#: Finished jobs after the avalanche before the second look. PanDA waits for 100
#: after ~10 scouts; trace bursts are small, so the replay scales it down.
DEFAULT_SECOND_LOOK_JOBS = 10
#: Finished jobs of the task before "predict, then refine" resizes the rest.
DEFAULT_REFINE_JOBS = 3
#: "Predict, then refine" never asks for less than this share of the prediction.
DEFAULT_REFINE_FLOOR = 0.5

_MEMORY_RETRIES = ("panda", "ladder")


@dataclass(frozen=True)
class ReplayRules:
    """How the replayed system reacts to failures and re-measures tasks.

    :param memory_retry: "panda" (panda-server's steps and task-wide raise, see the
        module doc) or "ladder" (one class up, above the top class double).
    :param memory_steps: PanDA's memory steps, MB per core, ascending.
    :param task_raise_fraction: share of raised files above which the task is raised.
    :param fixed_unit: the task's unit is ``MBPerCoreFixed`` (no task-wide raise).
    :param n_scouts: scout jobs per task.
    :param margin: margin of every estimate over the largest use it saw.
    :param second_look_jobs: finished jobs after the scouts before PanDA's second
        look at a scouted task (0: none).
    :param skipped_look_jobs: finished jobs before PanDA looks at a task that
        skipped its scouts (0: none, the default, because our refiner writes
        ``walltimeUnit``; with it NULL PanDA looks after 1, and its watchdog 5).
    :param refine_jobs: finished jobs before "predict, then refine" resizes the rest.
    :param refine_floor: the refined request is never below this share of the
        prediction (a few light first jobs must not starve the rest).
    """

    memory_retry: str = "panda"
    memory_steps: tuple[float, ...] = PANDA_RAM_STEPS_MB
    task_raise_fraction: float = TASK_RAISE_FRACTION
    fixed_unit: bool = False
    n_scouts: int = DEFAULT_N_SCOUTS
    margin: float = DEFAULT_SCOUT_MARGIN
    second_look_jobs: int = DEFAULT_SECOND_LOOK_JOBS
    skipped_look_jobs: int = 0
    refine_jobs: int = DEFAULT_REFINE_JOBS
    refine_floor: float = DEFAULT_REFINE_FLOOR

    def __post_init__(self) -> None:
        if self.memory_retry not in _MEMORY_RETRIES:
            raise ValueError(
                f"The 'memory_retry' field must be one of {_MEMORY_RETRIES}. "
                f"Got {self.memory_retry!r} instead."
            )
        steps = self.memory_steps
        if (
            not steps
            or any(not b > a for a, b in zip(steps, steps[1:], strict=False))
            or steps[0] <= 0
        ):
            raise ValueError(
                "The 'memory_steps' field must be positive and strictly ascending. "
                f"Got {steps!r} instead."
            )
        _check_range("task_raise_fraction", self.task_raise_fraction, 0.0, 1.0)
        _check_range("refine_floor", self.refine_floor, 0.0, 1.0)
        _check_range("margin", self.margin, 0.0, math.inf)
        for name, low in (
            ("n_scouts", 1),
            ("second_look_jobs", 0),
            ("skipped_look_jobs", 0),
            ("refine_jobs", 1),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(
                    f"The '{name}' field must be an integer >= {low}. "
                    f"Got {value!r} instead."
                )


def _check_range(name: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise ValueError(
            f"The '{name}' field must be in [{low}, {high}]. Got {value!r} instead."
        )


def next_class_up(request: np.ndarray, ladder: np.ndarray) -> np.ndarray:
    """Return the smallest ladder value above each request (above the top: double)."""
    idx = np.searchsorted(ladder, request, side="right")
    top = idx >= ladder.size
    return np.where(top, request * 2.0, ladder[np.minimum(idx, ladder.size - 1)])


def _step_above(value: float, steps: tuple[float, ...]) -> float | None:
    """Return the first step strictly above ``value`` (None above the top)."""
    for step in steps:
        if value < step:
            return step
    return None


def panda_memory_retry(
    job: int,
    job_request: float,
    task_ram: float,
    file_ram: list[float],
    rules: ReplayRules,
) -> tuple[float, float]:
    """Return (the job's file ramCount, the task's ramCount) after a memory failure.

    Follows ``increaseRamLimitJobJEDI`` (module doc): the task-wide raise when more
    than ``rules.task_raise_fraction`` of the task's files are above the task's
    ramCount, else the next step for the job's files. Unchanged values mean PanDA
    gives the job nothing more.

    :param job: index of the failed job in ``file_ram``.
    :param job_request: the failed attempt's request, MB per core.
    :param task_ram: the task's ramCount when the job failed.
    :param file_ram: ramCount of each of the task's files (0: never raised).
    :param rules: steps, fraction and unit.
    """
    steps = rules.memory_steps
    top = steps[-1]
    above = sum(1 for value in file_ram if value > task_ram)
    if not rules.fixed_unit and above / len(file_ram) > rules.task_raise_fraction:
        largest = max(file_ram)
        minimum = largest - 1.0 if largest > job_request else job_request
        if task_ram > minimum or task_ram >= top:
            return file_ram[job], task_ram
        raised = _step_above(max(task_ram, minimum), steps)
        return file_ram[job], top if raised is None else raised
    if job_request >= top:
        return file_ram[job], task_ram
    step = _step_above(job_request, steps)
    if step is None or task_ram > step:
        return file_ram[job], task_ram
    return max(file_ram[job], step), task_ram


@dataclass
class TaskReplay:
    """What happened to each job of one task (arrays in the task's job order)."""

    final_request: np.ndarray
    failed_attempts: np.ndarray
    lost: np.ndarray
    lost_s: np.ndarray
    lost_mb_s: np.ndarray


def replay_task(
    used: np.ndarray,
    run_s: np.ndarray,
    requested: np.ndarray,
    resource: str,
    ladder: np.ndarray,
    rules: ReplayRules,
    reestimate_after: int = 0,
    reestimate_floor: float = 0.0,
    cap: np.ndarray | None = None,
) -> TaskReplay:
    """Replay one task's jobs one after another, with retries and one re-estimate.

    A job's retries are settled before the next job starts, so whatever they taught
    PanDA (raised files, a raised task) reaches every later job: optimistic for
    PanDA, where many jobs run at once. Once ``reestimate_after`` jobs finished
    (0: never), every later job asks for the largest use seen so far times
    ``1 + rules.margin``, at least ``reestimate_floor`` times its own request and at
    most ``cap`` (PanDA's measurement overwrites the task's ramCount, so an earlier
    task-wide raise is dropped).
    """
    n = used.size
    panda_memory = resource == "memory" and rules.memory_retry == "panda"
    base = requested.astype(float).tolist()
    use, run = used.tolist(), run_s.tolist()
    out = TaskReplay(
        requested.astype(float).copy(),
        np.zeros(n, dtype=int),
        np.zeros(n, dtype=bool),
        np.zeros(n),
        np.zeros(n),
    )
    file_ram = [0.0] * n
    task_floor = 0.0
    finished: list[float] = []
    for i in range(n):
        request = max(base[i], task_floor) if panda_memory else base[i]
        while request < use[i]:
            attempt = request if resource == "time" else run[i]
            out.failed_attempts[i] += 1
            out.lost_s[i] += attempt
            if resource == "memory":
                out.lost_mb_s[i] += request * attempt
            if panda_memory:
                file_ram[i], task_floor = panda_memory_retry(
                    i, request, max(base[i], task_floor), file_ram, rules
                )
                retry = max(base[i], task_floor, file_ram[i])
            else:
                retry = float(next_class_up(np.array([request]), ladder)[0])
            if retry <= request:
                out.lost[i] = True
                break
            request = retry
        out.final_request[i] = request
        if out.lost[i]:
            continue
        finished.append(use[i])
        if reestimate_after and len(finished) == reestimate_after:
            estimate = max(finished) * (1.0 + rules.margin)
            for j in range(i + 1, n):
                value = max(estimate, reestimate_floor * float(requested[j]))
                base[j] = value if cap is None else min(value, float(cap[j]))
            task_floor = 0.0
    return out


def task_groups(task: Any) -> list[np.ndarray]:
    """Return each task's row indices, tasks by code, rows in their given order."""
    task = np.asarray(task)
    order = np.argsort(task, kind="stable")
    bounds = np.flatnonzero(np.diff(task[order])) + 1
    return np.split(order, bounds) if task.size else []
