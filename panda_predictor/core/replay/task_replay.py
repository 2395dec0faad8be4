"""Replay one task's jobs one after another under PanDA's rules.

The rules themselves (memory steps and the task-wide raise, maxAttempt, PanDA's
measurement) are :mod:`panda_predictor.core.replay.panda_rules`; this module walks a
task's jobs through them: each job's attempts until it fits or is lost
(:class:`_Retrying`), then whatever the finished jobs teach PanDA (the scouts'
measurement, the re-measurements) for the jobs after it (:func:`replay_task`).
:func:`~panda_predictor.core.replay.engine.replay` calls it for every task whose
requests a failure or a measurement changes.

Pure Python and numpy.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from dataclasses import dataclass

import numpy as np

from panda_predictor.core.replay.panda_rules import (
    ReplayRules,
    memory_retry_by_counts,
    panda_measurement,
)


@dataclass
class TaskReplay:
    """What happened to each job of one task (arrays in the task's job order)."""

    final_request: np.ndarray
    failed_attempts: np.ndarray
    lost: np.ndarray
    lost_s: np.ndarray
    lost_mb_s: np.ndarray


class _RaisedFiles:
    """The ramCounts PanDA gave a task's files, sorted, for the 30 % count."""

    def __init__(self, n_files: int) -> None:
        self.n_files = n_files
        self.sorted: list[float] = []
        self.own: dict[int, float] = {}

    def retry(
        self, job: int, job_request: float, task_ram: float, rules: ReplayRules
    ) -> tuple[float, float]:
        """Apply PanDA's memory retry to ``job``; return its file and task ramCount."""
        old = self.own.get(job, 0.0)
        above = len(self.sorted) - bisect_right(self.sorted, task_ram)
        largest = self.sorted[-1] if self.sorted else 0.0
        own, task = memory_retry_by_counts(
            old, job_request, task_ram, above, largest, self.n_files, rules
        )
        if own != old:
            if old > 0:
                self.sorted.pop(bisect_right(self.sorted, old) - 1)
            insort(self.sorted, own)
            self.own[job] = own
        return own, task


def replay_task(
    used: np.ndarray,
    run_s: np.ndarray,
    requested: np.ndarray,
    resource: str,
    ladder: np.ndarray,
    rules: ReplayRules,
    *,
    n_scouts: int = 0,
    remeasure: bool = False,
    early: int = 0,
    cap: np.ndarray | None = None,
    retry_request: np.ndarray | None = None,
) -> TaskReplay:
    """Replay one task's jobs one after another, with retries and re-measurements.

    A job's retries are settled before the next job starts, so whatever they taught
    PanDA (raised files, a raised task) reaches every later job: optimistic for
    PanDA, where many jobs run at once. A job is lost after ``rules.max_attempts``
    failed attempts; a retry asks for what PanDA's rule gives, and at least the
    job's ``retry_request`` when there is one. A retry one class up stops at the
    job's ``cap`` (the user's request) until an attempt at the cap itself failed;
    PanDA's memory steps are PanDA's and are not capped.

    With ``n_scouts`` > 0 the first ``n_scouts`` jobs are scouts asking for their
    requests; once they are settled, every later job asks for
    :func:`panda_measurement` of the finished scouts. With ``remeasure``, once
    ``rules.remeasure_after`` jobs of the task finished (points reached while the
    scouts run are covered by the scouts' measurement), every later job asks for
    the measurement of all finished jobs; ``early`` > 0 adds, for a task without
    scouts, a re-measurement once that many jobs are settled (finished, or lost
    after ``rules.max_attempts``) and at least one finished (ours,
    :data:`~panda_predictor.core.replay.panda_rules.EARLY_REMEASURE_AFTER`: PanDA's
    own measurement once asked, for a task PanDA re-measures at all), the point a
    scouted task is measured at. A measured
    request is at most ``cap``, and overwrites the task's ramCount (an earlier
    task-wide raise is dropped). A memory task with ``rules.fixed_unit`` is never
    measured.

    One pass over the jobs in Python; the finished uses are only sorted at the
    few measurements (PanDA's percentiles), so a task costs O(n) plus those sorts.
    """
    n = used.size
    measured = not (resource == "memory" and rules.fixed_unit)
    base = requested.tolist()
    use = used.tolist()
    caps = cap.tolist() if cap is not None else None
    retrying = _Retrying(
        resource,
        rules,
        ladder.tolist(),
        run_s.tolist(),
        caps,
        retry_request.tolist() if retry_request is not None else None,
        _RaisedFiles(n),
    )
    points = sorted(rules.remeasure_after) if remeasure and measured else []
    # Settled jobs after which our early re-measurement comes (0: none).
    early_due = early if remeasure and measured and n_scouts == 0 else 0
    scouts_end = n_scouts - 1 if 0 < n_scouts < n else -1
    final, lost_s, lost_mb_s = [0.0] * n, [0.0] * n, [0.0] * n
    failed, lost = [0] * n, [False] * n
    finished: list[float] = []
    value: float | None = None  # PanDA's latest measurement, if any
    floor = 0.0
    for j in range(n):
        own_request = base[j]
        if value is not None:
            own_request = value if caps is None else min(value, caps[j])
        final[j], failed[j], lost[j], lost_s[j], lost_mb_s[j], floor = retrying.settle(
            j, use[j], own_request, floor
        )
        if not lost[j]:
            finished.append(use[j])
        if early_due and j + 1 >= early_due and finished:
            # Our early re-measurement: once ``early`` jobs are settled (finished,
            # or lost), as the scouts are measured, from the finished ones.
            early_due = 0
            value = panda_measurement(resource, finished, rules.time_rule)
            floor = 0.0
        if j == scouts_end or (j > scouts_end and points):
            measure = measured if j == scouts_end else len(finished) == points[0]
            if measure and finished:
                value = panda_measurement(resource, finished, rules.time_rule)
                floor = 0.0
            _drop_passed(points, len(finished), scouts=j == scouts_end)
    return TaskReplay(
        np.array(final),
        np.array(failed, dtype=int),
        np.array(lost, dtype=bool),
        np.array(lost_s),
        np.array(lost_mb_s),
    )


@dataclass
class _Retrying:
    """How the jobs of one task are retried (see :func:`replay_task`)."""

    resource: str
    rules: ReplayRules
    steps: list[float]
    run_s: list[float]
    caps: list[float] | None
    retries: list[float] | None
    files: _RaisedFiles

    def settle(
        self, j: int, used: float, own_request: float, floor: float
    ) -> tuple[float, int, bool, float, float, float]:
        """Run job ``j`` until it fits or is lost.

        :param used: what the job used.
        :param own_request: what the job asks for (its own, or PanDA's measurement).
        :param floor: the task's ramCount after a task-wide raise (0: none).
        :return: the last request, the failed attempts, whether the job was lost,
            the failed attempts' seconds and MB-seconds, and the task's floor.
        """
        rules = self.rules
        time_resource = self.resource == "time"
        panda_memory = not time_resource and rules.memory_retry == "panda"
        request = max(own_request, floor) if panda_memory else own_request
        attempts, lost, lost_s, lost_mb_s = 0, False, 0.0, 0.0
        while request < used:
            attempt_s = request if time_resource else self.run_s[j]
            attempts += 1
            lost_s += attempt_s
            if not time_resource:
                lost_mb_s += request * attempt_s
            if attempts >= rules.max_attempts:
                lost = True
                break
            if panda_memory:
                task_ram = max(own_request, floor)
                own, raised = self.files.retry(j, request, task_ram, rules)
                if raised > task_ram:
                    floor = raised
                retry = max(task_ram, floor, own)
            else:
                cap = self.caps[j] if self.caps is not None else None
                retry = _class_up(request, self.steps, cap)
            if self.retries is not None:
                retry = max(retry, self.retries[j])
            request = retry
        return request, attempts, lost, lost_s, lost_mb_s, floor


def _class_up(request: float, steps: list[float], cap: float | None) -> float:
    """Return the retry of a failed ``request`` one class up (above the top class
    doubled), at most ``cap`` until an attempt at the cap itself failed: the job
    never runs past the user's request (the batch system stops it there)."""
    at = bisect_right(steps, request)
    retry = steps[at] if at < len(steps) else request * 2.0
    if cap is not None and request < cap:
        retry = min(retry, cap)
    return retry


def _drop_passed(points: list[int], n_finished: int, *, scouts: bool) -> None:
    """Remove the re-measurement points a task has passed, in place.

    After the scouts, every point their measurement covers; later, the point
    just reached (the caller measured there).
    """
    if scouts:
        points[:] = [p for p in points if p > n_finished]
    elif points[0] == n_finished:
        points.pop(0)
