"""PanDA's own reactions a replay must reproduce: retries, maxAttempt, re-measurements.

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

A job PanDA gives no more memory is retried as it is and fails the same way.
``increase_memory_xtimes`` (SPLITRULE ``RX/RY/RZ``) is another action, not replayed.

**Time limits.** The retry module's ``increase_cputime`` action calls
``requestTaskParameterRecalculation``, which sets the task's ``walltimeUnit`` to NULL
(at most once per 30 minutes) so that JEDI re-measures the task; it does not step
the failed job's limit, so the replay keeps a simple, documented rule for time:
retry one class up, above the top class double, but not past the user's request
until the request itself failed (a job log's jobs never ran past it).

**maxAttempt.** A job is lost once its input file has been tried ``maxAttempt``
times. JEDI's ContentsFeeder (``pandajedi/jediorder/ContentsFeeder.py``) gives the
master dataset's files the task parameter ``maxAttempt``, 1 when the split rule
disables auto-retry, and **3 by default**. ATLAS's analysis refiner
(``AtlasAnalTaskRefiner``) sets 10 for user tasks; ATLAS's production refiner
(``AtlasProdTaskRefiner``) sets none, so a production task gets what its request
carries, else 3. The replay's default is JEDI's 3 (:data:`DEFAULT_MAX_ATTEMPTS`).

**Re-measurement.** PanDA re-measures *every* running task, scouted or not, after
5 and again after 100 finished jobs: ``job_complex_module.propagateResultToJEDI``
sets the task's ``walltimeUnit`` back to NULL at those counts, and JEDI's watchdog
(``setScoutJobDataToTasks_JEDI``, "set scout job data w/o scouts") then recomputes
ramCount, cpuTime, walltime, ... from the task's finished jobs with
``task_utils_module.getScoutJobData_JEDI``, whatever a plugin wrote before, unless
the unit ends in ``Fixed`` (for cpuTime, the unit in the task *parameters*: a
``Fixed`` cpuTimeUnit written only into JEDI_TASKS is not looked at). The scouts'
own estimate is the same function over the finished scouts.
:func:`panda_measurement` is that function for one resource:

- memory (``ramCount``, ``MBPerCore``): per job ``ceil(use kB)``, the 75th percentile
  (linear, as ``CoreUtils.percentile``), ``x 110 // 100``, ``/ 1024`` and ``int()``:
  PanDA rounds *down*; a result below 0 becomes 1 (and the replay asks at least 1);
- time: the trace's "walltime" is a job's run time in seconds, and what limits a
  job's run time in PanDA is its ``maxWalltime``, which ``getJobMaxWalltime`` derives
  from the task's ``cpuTime``: ``cpuTime x nEvents / coreCount / corePower /
  cpuEfficiency + baseWalltime``. ``cpuTime`` is the 95th percentile of the jobs'
  ``(run - baseWalltime) x corePower x coreCount x cpuEfficiency / nEvents``, x 1.5,
  rounded up; for jobs alike in events and site that is ``ceil(95th percentile of
  the run times x 1.5)`` seconds (baseWalltime 0: the trace has none). PanDA's task
  ``walltime`` (``kSI2kseconds``, the maximum CPU time per MB of input x 1.5) does
  not set a job's limit; ``ReplayRules(time_rule="walltime")`` replays it as
  ``ceil(max x 1.5)`` all the same.

Pure Python and numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from panda_predictor.core.domain.memory_steps import MEMORY_STEPS_MB
from panda_predictor.core.label_values import DEFAULT_LABEL_PARAMS, LabelParams

#: Share of a task's files above the task's ramCount that makes PanDA raise the task.
TASK_RAISE_FRACTION = 0.3
#: Scout jobs per task (PanDA sends about 10; trace "tasks" are smaller).
DEFAULT_N_SCOUTS = 3
#: Finished jobs after which PanDA re-measures a running task.
DEFAULT_REMEASURE_AFTER: tuple[int, ...] = (5, 100)
#: Settled jobs (finished, or lost after maxAttempt) after which our early
#: re-measurement asks PanDA to re-measure a task that skipped its scouts
#: (:mod:`panda_predictor.db.early_remeasure`): the point its scouts would have
#: been measured at, so jobs 4 and 5 get PanDA's measurement as a scouted task's
#: do.
EARLY_REMEASURE_AFTER = DEFAULT_N_SCOUTS
#: Attempts of one job before it is lost: JEDI's default task maxAttempt.
DEFAULT_MAX_ATTEMPTS = 3

_MEMORY_RETRIES = ("panda", "ladder")
_TIME_RULES = ("cputime", "walltime")
_RESOURCES = ("time", "memory")


@dataclass(frozen=True)
class ReplayRules:
    """How the replayed system reacts to failures and re-measures tasks.

    :param memory_retry: "panda" (panda-server's steps and task-wide raise, see the
        module doc) or "ladder" (one class up, above the top class double).
    :param memory_steps: PanDA's memory steps, MB per core, ascending.
    :param task_raise_fraction: share of raised files above which the task is raised.
    :param fixed_unit: the task's unit is ``MBPerCoreFixed``: no task-wide raise, and
        PanDA never re-measures its memory.
    :param n_scouts: scout jobs per task.
    :param remeasure_after: finished jobs of a task after which PanDA re-measures
        it, ascending (empty: never).
    :param max_attempts: attempts of one job before it is lost (PanDA's maxAttempt).
    :param time_rule: which of PanDA's measurements sizes a time request: "cputime"
        (95th percentile x 1.5, what sets a job's limit) or "walltime" (max x 1.5).
    """

    memory_retry: str = "panda"
    memory_steps: tuple[float, ...] = MEMORY_STEPS_MB
    task_raise_fraction: float = TASK_RAISE_FRACTION
    fixed_unit: bool = False
    n_scouts: int = DEFAULT_N_SCOUTS
    remeasure_after: tuple[int, ...] = DEFAULT_REMEASURE_AFTER
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    time_rule: str = "cputime"

    def __post_init__(self) -> None:
        for name, allowed in (
            ("memory_retry", _MEMORY_RETRIES),
            ("time_rule", _TIME_RULES),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"The '{name}' field must be one of {allowed}. "
                    f"Got {getattr(self, name)!r} instead."
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
        for name, low in (("n_scouts", 1), ("max_attempts", 1)):
            if not _is_int(getattr(self, name), low):
                raise ValueError(
                    f"The '{name}' field must be an integer >= {low}. "
                    f"Got {getattr(self, name)!r} instead."
                )
        points = self.remeasure_after
        if (
            not isinstance(points, tuple)
            or not all(_is_int(p, 1) for p in points)
            or any(not b > a for a, b in zip(points, points[1:], strict=False))
        ):
            raise ValueError(
                "The 'remeasure_after' field must be a tuple of ascending integers "
                f">= 1. Got {points!r} instead."
            )


def early_points(flags: Any) -> np.ndarray:
    """Return per task or job after how many settled jobs it is re-measured early:
    :data:`EARLY_REMEASURE_AFTER` where ``flags`` (the decision's
    ``early_remeasure``) is true, else 0 (PanDA's own points alone)."""
    return np.where(np.asarray(flags, dtype=bool), EARLY_REMEASURE_AFTER, 0)


def _is_int(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _check_range(name: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise ValueError(
            f"The '{name}' field must be in [{low}, {high}]. Got {value!r} instead."
        )


def panda_measurement(
    resource: str,
    finished_uses: Any,
    time_rule: str = "cputime",
    params: LabelParams = DEFAULT_LABEL_PARAMS,
) -> float:
    """Return what PanDA writes for ``resource`` after measuring ``finished_uses``.

    ``getScoutJobData_JEDI``'s formulas (module doc), for the scouts' estimate and
    every re-measurement alike. Memory: ``int(p75(ceil(use x 1024 kB)) x 110 // 100
    / 1024)`` MB per core, rounded down, at least 1. Time ("cputime", the default):
    ``ceil(p95(run s) x 1.5)``, the job limit PanDA derives from cpuTime;
    "walltime": ``ceil(max x 1.5)``.

    :param resource: "memory" (uses in MB per core) or "time" (uses in seconds).
    :param finished_uses: what each finished job used (at least one job).
    :param time_rule: "cputime" or "walltime" (see :class:`ReplayRules`).
    :param params: the quantiles and margins of the labels (JEDI's by default).
    """
    if resource not in _RESOURCES:
        raise ValueError(
            f"The 'resource' field must be 'time' or 'memory'. Got {resource!r} "
            "instead."
        )
    if time_rule not in _TIME_RULES:
        raise ValueError(
            f"The 'time_rule' field must be one of {_TIME_RULES}. "
            f"Got {time_rule!r} instead."
        )
    uses = np.asarray(finished_uses, dtype=float).reshape(-1)
    if uses.size == 0 or not np.all(np.isfinite(uses)):
        raise ValueError(
            "The 'finished_uses' field must hold at least one finite number. "
            f"Got {uses[:3]} instead."
        )
    if resource == "memory":
        kb = _percentile(np.ceil(uses * 1024.0), params.ram_quantile)
        # PanDA's integer margin (``(100 + 10) // 100``) and int(): rounds down.
        percent = round(params.ram_margin * 100)
        return float(max(int(kb * percent // 100 / 1024.0), 1))
    if time_rule == "cputime":
        seconds = _percentile(uses, params.cpu_quantile) * params.cpu_margin
    else:
        seconds = float(uses.max()) * params.walltime_margin
    return float(max(math.ceil(seconds), 1))


def _percentile(values: np.ndarray, q: float) -> float:
    """Return the ``q`` quantile of ``values`` interpolated linearly, as
    ``CoreUtils.percentile`` does (``numpy.quantile``'s default, without its cost).
    """
    ordered = np.sort(values)
    k = (ordered.size - 1) * q
    below, above = math.floor(k), math.ceil(k)
    if below == above:
        return float(ordered[below])
    return float(ordered[below] * (above - k) + ordered[above] * (k - below))


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


def memory_retry_by_counts(
    own: float,
    job_request: float,
    task_ram: float,
    above: int,
    largest: float,
    n_files: int,
    rules: ReplayRules,
) -> tuple[float, float]:
    """Return (the job's file ramCount, the task's ramCount) as PanDA raises them.

    ``above`` files of ``n_files`` have a ramCount above ``task_ram``; ``largest``
    is the largest file ramCount (0: none raised); ``own`` the failed job's.
    """
    steps = rules.memory_steps
    top = steps[-1]
    if not rules.fixed_unit and above / n_files > rules.task_raise_fraction:
        minimum = largest - 1.0 if largest > job_request else job_request
        if task_ram > minimum or task_ram >= top:
            return own, task_ram
        raised = _step_above(max(task_ram, minimum), steps)
        return own, top if raised is None else raised
    if job_request >= top:
        return own, task_ram
    step = _step_above(job_request, steps)
    if step is None or task_ram > step:
        return own, task_ram
    return max(own, step), task_ram


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
    above = sum(1 for value in file_ram if value > task_ram)
    return memory_retry_by_counts(
        file_ram[job], job_request, task_ram, above, max(file_ram), len(file_ram), rules
    )


def task_groups(task: Any) -> list[np.ndarray]:
    """Return each task's row indices, tasks by code, rows in their given order."""
    task = np.asarray(task)
    order = np.argsort(task, kind="stable")
    bounds = np.flatnonzero(np.diff(task[order])) + 1
    return np.split(order, bounds) if task.size else []
