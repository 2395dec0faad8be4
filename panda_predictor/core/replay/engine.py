"""Replay a job log under an allocation strategy: what do scouts cost, what does a
prediction save?

Each job asks for the amount its strategy says (memory in MB per core, or time). A
job that gets less than it used fails: the failed attempt's core-hours are lost, the
job is delayed by that attempt and retried the way PanDA retries it (memory: panda-
server's steps and task-wide raise; time: one class up, above the top class double),
until PanDA's maxAttempt, after which it is lost; see
:mod:`panda_predictor.core.replay.panda_rules`. A job that gets more than it used wastes
the difference; a failed attempt wastes all it held (Tovar et al.'s waste model).
With scouts, the first jobs of a task run with the request and the
rest of the task waits for them, then asks for PanDA's measurement of the scouts
(:func:`~panda_predictor.core.replay.panda_rules.panda_measurement`); that wait is the
time until the bulk of the task can start. PanDA re-measures every running task
after 5 and after 100 finished jobs, scouted or not (``remeasure``).

Pure numpy: the caller supplies per-job arrays (task code, used amount, run time,
cores) and the strategy's requests.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass
from typing import Any

import numpy as np

from panda_predictor.core.replay.panda_rules import (
    DEFAULT_N_SCOUTS,
    ReplayRules,
    next_class_up,
    panda_measurement,
)
from panda_predictor.core.replay.task_replay import replay_task
from panda_predictor.core.replay.tasks import scout_delay, task_index

__all__ = [
    "DEFAULT_N_SCOUTS",
    "ReplayCase",
    "ReplayOutcome",
    "ReplayRules",
    "next_class_up",
    "panda_measurement",
    "replay",
]


@dataclass(frozen=True)
class ReplayOutcome:
    """What one strategy cost over the replayed jobs.

    ``failed_job_rate`` counts jobs with at least one failed attempt,
    ``lost_job_rate`` jobs that never finished (every attempt up to PanDA's
    maxAttempt failed), ``retries_per_job`` the retried attempts per job. Lost
    hours are those of failed attempts; wasted hours the unused part of the
    successful ones plus the failed attempts whole (their lost hours).
    """

    strategy: str
    n_jobs: int
    n_tasks: int
    failed_job_rate: float
    lost_core_hours: float
    wasted_core_hours: float
    wasted_gb_hours: float
    mean_bulk_delay_hours: float
    mean_retry_delay_hours: float
    lost_job_rate: float = 0.0
    lost_gb_hours: float = 0.0
    retries_per_job: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return the figures as a plain mapping."""
        return asdict(self)


def _check(arrays: dict[str, Any]) -> dict[str, np.ndarray]:
    out = {k: np.asarray(v, dtype=float) for k, v in arrays.items()}
    sizes = {k: v.shape for k, v in out.items()}
    if len(set(sizes.values())) != 1 or next(iter(out.values())).ndim != 1:
        raise ValueError(
            f"The replay arrays must be 1-D and of one length. Got {sizes} instead."
        )
    for name, array in out.items():
        if name in ("requested", "cap", "retry_request"):
            continue
        if not np.all(np.isfinite(array) & (array >= 0)):
            raise ValueError(
                f"The '{name}' field must hold finite numbers >= 0. "
                f"Got {array[~(np.isfinite(array) & (array >= 0))][:3]} instead."
            )
    if not np.all(np.isfinite(out["requested"]) & (out["requested"] > 0)):
        raise ValueError("The 'requested' field must hold positive finite numbers.")
    retry = out["retry_request"]
    if not np.all(np.isfinite(retry) & (retry >= 0)):
        raise ValueError(
            "The 'retry_request' field must hold finite numbers >= 0 (0: none). "
            f"Got {retry[~(np.isfinite(retry) & (retry >= 0))][:3]} instead."
        )
    if not np.all(out["cap"] > 0):
        raise ValueError("The 'cap' field must hold positive numbers (inf: no cap).")
    return out


@dataclass(frozen=True)
class ReplayCase:
    """The jobs of one replay, what each asks for, and how PanDA treats them.

    :func:`replay` and :func:`replay_by_job` take one, so the arguments of a replay
    are written (and documented) once. A failed time attempt runs until its limit
    (``requested`` seconds); a failed memory attempt is assumed to run its whole run
    time before being killed (an upper bound: logs do not say when memory ran out).
    Jobs of a task are replayed in the given row order (see
    :func:`~panda_predictor.core.replay.task_replay.replay_task`). Per-task settings
    (``scouts``, ``remeasure``) are read from the task's first row.

    :param resource: "time" (used/requested in s) or "memory" (MB per core).
    :param task: (n,) task codes.
    :param used: (n,) what each job used.
    :param run_s: (n,) each job's run time in seconds.
    :param cores: (n,) cores per job.
    :param requested: (n,) what the strategy asks for (scouts: the scouts' request).
    :param ladder: ascending class values for time retries (and memory retries
        with ``rules.memory_retry="ladder"``).
    :param bulk_delay_s: (n,) per job, how long it waited for scouts (default 0).
    :param scouts: (n,) or one number: scout jobs of the task (0: none); the jobs
        after them ask for PanDA's measurement of the finished scouts.
    :param remeasure: (n,) or one bool: PanDA re-measures the task after
        ``rules.remeasure_after`` finished jobs (PanDA does, for every task).
    :param early_remeasure: (n,) or one number: settled jobs (finished, or lost)
        after which a re-measured task is also re-measured early (the hook asks
        PanDA to,
        :data:`~panda_predictor.core.replay.panda_rules.EARLY_REMEASURE_AFTER`;
        0: PanDA's points alone); a task's first job decides. A scouted task is
        measured after its scouts anyway.
    :param cap: (n,) measured requests never exceed it (default: no cap).
    :param retry_request: (n,) a strategy's own retry value: a retry asks for at
        least it (default, or 0: PanDA's rule alone).
    :param rules: retry, maxAttempt and re-measurement rules.
    """

    resource: str
    task: Any
    used: Any
    run_s: Any
    cores: Any
    requested: Any
    ladder: Any
    bulk_delay_s: Any = None
    _: KW_ONLY
    scouts: Any = 0
    remeasure: Any = False
    early_remeasure: Any = 0
    cap: Any = None
    retry_request: Any = None
    rules: ReplayRules = ReplayRules()


def replay(strategy: str, case: ReplayCase) -> ReplayOutcome:
    """Replay the jobs of ``case`` and return what they cost, summed.

    :param strategy: name reported with the result.
    :param case: the jobs, their requests and PanDA's rules.
    """
    return replay_by_job(case).summed(strategy, case.resource)


@dataclass(frozen=True)
class JobOutcomes:
    """Per job (rows in the order given to the replay) what a strategy cost it.

    ``failed`` at least one failed attempt, ``lost`` never finished, ``attempts``
    failed attempts, ``lost_s`` seconds of failed attempts, ``lost_core_hours`` and
    ``lost_gb_hours`` their hours, ``wasted_hours`` the unused part of the
    successful attempt plus the failed attempts whole (core-hours for time,
    GB-hours for memory);
    ``task_bulk_delay_s`` per task (in task-code order) how long its bulk waited.
    """

    failed: np.ndarray
    lost: np.ndarray
    attempts: np.ndarray
    lost_s: np.ndarray
    lost_core_hours: np.ndarray
    lost_gb_hours: np.ndarray
    wasted_hours: np.ndarray
    task_bulk_delay_s: np.ndarray

    @property
    def n_tasks(self) -> int:
        """Return how many tasks the jobs belong to."""
        return int(self.task_bulk_delay_s.size)

    def summed(self, strategy: str, resource: str) -> ReplayOutcome:
        """Return the figures summed over the jobs, as :func:`replay` reports them.

        The one place a replay's row is summed, so a caller that keeps the figures
        per job (to break them down) reports the same row as :func:`replay`.

        :param strategy: name reported with the result.
        :param resource: the replay's resource, "time" or "memory": the unit of
            ``wasted_hours``.
        """
        n, n_tasks = self.failed.size, self.n_tasks
        time = resource == "time"
        return ReplayOutcome(
            strategy=strategy,
            n_jobs=int(n),
            n_tasks=int(n_tasks),
            failed_job_rate=float(self.failed.mean()) if n else 0.0,
            lost_core_hours=float(self.lost_core_hours.sum()),
            wasted_core_hours=float(self.wasted_hours.sum()) if time else 0.0,
            wasted_gb_hours=float(self.wasted_hours.sum()) if not time else 0.0,
            mean_bulk_delay_hours=float(self.task_bulk_delay_s.mean() / 3600.0)
            if n_tasks
            else 0.0,
            mean_retry_delay_hours=float(self.lost_s.mean() / 3600.0) if n else 0.0,
            lost_job_rate=float(self.lost.mean()) if n else 0.0,
            lost_gb_hours=float(self.lost_gb_hours.sum()),
            retries_per_job=float((self.attempts.sum() - self.lost.sum()) / n)
            if n
            else 0.0,
        )


def _case_arrays(case: ReplayCase) -> dict[str, np.ndarray]:
    """Return the per-job arrays of ``case``, defaults filled in, or raise what is
    wrong with them."""
    if case.resource not in ("time", "memory"):
        raise ValueError(
            f"The 'resource' field must be 'time' or 'memory'. "
            f"Got {case.resource!r} instead."
        )
    n = np.asarray(case.used).size
    cap, retry_request = case.cap, case.retry_request
    a = _check(
        {
            "task": case.task,
            "used": case.used,
            "run_s": case.run_s,
            "cores": case.cores,
            "requested": case.requested,
            "bulk_delay_s": np.zeros(n)
            if case.bulk_delay_s is None
            else case.bulk_delay_s,
            "scouts": np.broadcast_to(np.asarray(case.scouts, dtype=float), (n,)),
            "remeasure": np.broadcast_to(np.asarray(case.remeasure, dtype=float), (n,)),
            "early": np.broadcast_to(
                np.asarray(case.early_remeasure, dtype=float), (n,)
            ),
            "cap": np.full(n, np.inf) if cap is None else cap,
            "retry_request": np.zeros(n) if retry_request is None else retry_request,
        }
    )
    if np.any(a["scouts"] % 1):
        raise ValueError(
            "The 'scouts' field must hold whole numbers of jobs. "
            f"Got {a['scouts'][a['scouts'] % 1 > 0][:3]} instead."
        )
    return a


def replay_by_job(case: ReplayCase) -> JobOutcomes:
    """Return :func:`replay`'s figures per job instead of summed, for paired
    comparisons such as a bootstrap over days."""
    resource, rules = case.resource, case.rules
    cap, retry_request = case.cap, case.retry_request
    a = _case_arrays(case)
    n = a["used"].size
    steps = np.sort(np.asarray(case.ladder, dtype=float))
    code, order, starts, sizes = task_index(np.asarray(case.task))
    # Every figure below is a sum over jobs: work in task order, where each task's
    # rows are one slice (a view, no copy).
    a = {name: values[order] for name, values in a.items()}
    code = code[order]
    n_scouts = a["scouts"][starts].astype(int)
    measure = a["remeasure"][starts] > 0
    final = a["requested"].copy()
    attempts = np.zeros(n, dtype=int)
    lost = np.zeros(n, dtype=bool)
    lost_s = np.zeros(n)
    lost_mb_s = np.zeros(n)
    # Only tasks where a job fails or a measurement changes requests need the
    # job-by-job replay; the others keep their requests as they are.
    needs = np.zeros(sizes.size, dtype=bool)
    np.logical_or.at(needs, code, a["requested"] < a["used"])
    needs |= (n_scouts > 0) & (sizes > n_scouts)
    early = a["early"][starts].astype(int)
    if rules.remeasure_after:
        needs |= measure & (sizes > rules.remeasure_after[0])
    needs |= measure & (early > 0) & (sizes > early)
    for k in np.flatnonzero(needs).tolist():
        rows = slice(int(starts[k]), int(starts[k] + sizes[k]))
        out = replay_task(
            a["used"][rows],
            a["run_s"][rows],
            a["requested"][rows],
            resource,
            steps,
            rules,
            n_scouts=int(n_scouts[k]),
            remeasure=bool(measure[k]),
            early=int(early[k]),
            cap=a["cap"][rows] if cap is not None else None,
            retry_request=a["retry_request"][rows]
            if retry_request is not None
            else None,
        )
        final[rows] = out.final_request
        attempts[rows] = out.failed_attempts
        lost[rows] = out.lost
        lost_s[rows] = out.lost_s
        lost_mb_s[rows] = out.lost_mb_s
    # Wasted: the unused part of the successful attempt plus every failed
    # attempt whole (what it held was used for nothing), as in Tovar et al.'s
    # waste model. Counting only the unused part would reward failing: a task
    # that fails and is stepped up to just above its use looks frugal.
    spare = np.where(lost, 0.0, final - a["used"])
    if resource == "time":
        wasted = (spare + lost_s) * a["cores"] / 3600.0
    else:
        wasted = (spare * a["run_s"] + lost_mb_s) * a["cores"] / 1024 / 3600
    bulk = np.zeros(sizes.size)
    np.maximum.at(bulk, code, a["bulk_delay_s"])
    # Back from task order to the order the rows were given in.
    back = np.empty_like(order)
    back[order] = np.arange(order.size)
    return JobOutcomes(
        failed=(attempts > 0)[back],
        lost=lost[back],
        attempts=attempts[back],
        lost_s=lost_s[back],
        lost_core_hours=(lost_s * a["cores"] / 3600.0)[back],
        lost_gb_hours=(lost_mb_s * a["cores"] / 1024 / 3600)[back],
        wasted_hours=wasted[back],
        task_bulk_delay_s=bulk,
    )


@dataclass(frozen=True)
class ReplayJobs:
    """The jobs of one target, as every strategy of a replay shares them.

    One place builds the scouts' row and every "start at once" row, so the trace
    benchmark's table and the delay price's tuning replay exactly the same system.
    Every first request is capped at the user's request where there is one (the
    jobs never ran past it), and so is every measurement; where there is none the
    scouts, and every task that keeps them, ask for ``no_request`` (for memory the
    queue's default; None: the top class's value, as for time, where no limit is
    set).

    :param resource: "time" or "memory".
    :param task: (n,) task code per job (:func:`tasks_from_bursts`), rows in job order.
    :param used: (n,) what each job used (at least 1 is asked).
    :param run_s: (n,) each job's run time in seconds.
    :param cores: (n,) cores per job.
    :param ladder: ascending class values (time retries go one class up).
    :param request: (n,) the user's request (NaN or <= 0: none).
    :param rules: PanDA's retry, maxAttempt and re-measurement rules.
    :param no_request: what a job without a request asks for (None: the top
        class's value).
    """

    resource: str
    task: np.ndarray
    used: np.ndarray
    run_s: np.ndarray
    cores: np.ndarray
    ladder: np.ndarray
    request: np.ndarray
    rules: ReplayRules = ReplayRules()
    no_request: float | None = None

    @property
    def cap(self) -> np.ndarray:
        """Return per job the user's request, inf where there is none."""
        given = np.isfinite(self.request) & (self.request > 0)
        return np.where(given, self.request, np.inf)

    @property
    def default(self) -> np.ndarray:
        """Return per job what its scouts ask for: the request, else ``no_request``
        (the top class's value where that is None)."""
        cap = self.cap
        fallback = self.ladder[-1] if self.no_request is None else self.no_request
        return np.where(np.isfinite(cap), cap, fallback)

    def _common(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "task": self.task,
            "used": self.used,
            "run_s": self.run_s,
            "cores": self.cores,
            "ladder": self.ladder,
            "cap": self.cap,
            "rules": self.rules,
        }

    def scouts(self) -> ReplayOutcome:
        """Return PanDA as it is: scouts at the default, the bulk waits for them."""
        return self.started_at_once("scouts", self.default, np.zeros(self.used.size))

    def started_at_once(
        self,
        strategy: str,
        value: Any,
        applied: Any = None,
        *,
        retry_request: Any = None,
        remeasure: Any = True,
        early_remeasure: Any = 0,
    ) -> ReplayOutcome:
        """Return the row of a strategy whose applied tasks start at once.

        An applied task's jobs ask for ``value`` (capped at the request, at least
        1) with no wait; the other tasks run their scouts as :meth:`scouts` does.

        :param applied: (n,) per job, whether its task skips its scouts (a task's
            first job decides; default: every task).
        :param retry_request: (n,) a strategy's own retry value (0: PanDA's rule).
        :param remeasure: whether PanDA re-measures the task after
            ``rules.remeasure_after`` finished jobs: one bool, or (n,) per job (a
            task's first job decides; False: the value was written ``...Fixed``).
        :param early_remeasure: settled jobs after which a task that started at
            once is re-measured early too: one number, or (n,) per job (a task's
            first job decides; 0: never; :class:`ReplayCase`).
        """
        return replay(
            strategy,
            self._case(value, applied, retry_request, remeasure, early_remeasure),
        )

    def by_job(
        self,
        value: Any = None,
        applied: Any = None,
        remeasure: Any = True,
        early_remeasure: Any = 0,
    ) -> JobOutcomes:
        """Return :meth:`started_at_once`'s figures per job (re-measured as PanDA
        does unless ``remeasure`` says otherwise); ``value`` None: the scouts' row
        (:meth:`scouts`)."""
        if value is None:
            value, applied = self.default, np.zeros(self.used.size, dtype=bool)
            remeasure, early_remeasure = True, 0
        return replay_by_job(
            self._case(value, applied, None, remeasure, early_remeasure)
        )

    def _case(
        self,
        value: Any,
        applied: Any,
        retry_request: Any,
        remeasure: Any,
        early_remeasure: Any = 0,
    ) -> ReplayCase:
        """Return the case :func:`replay` replays for a start-at-once strategy."""
        n = self.used.size
        applied = (
            np.ones(n, dtype=bool)
            if applied is None
            else _per_task(self.task, np.asarray(applied, dtype=bool))
        )
        value = np.maximum(np.minimum(np.asarray(value, dtype=float), self.cap), 1.0)
        delay = scout_delay(self.task, self.run_s, self.rules.n_scouts)
        # A task that ran its scouts holds PanDA's measured value, never a Fixed
        # one: PanDA re-measures it whatever the strategy writes elsewhere.
        remeasure = np.broadcast_to(np.asarray(remeasure, dtype=bool), (n,))
        return ReplayCase(
            requested=np.where(applied, value, self.default),
            bulk_delay_s=np.where(applied, 0.0, delay),
            scouts=np.where(applied, 0, self.rules.n_scouts),
            remeasure=remeasure | ~applied,
            early_remeasure=early_remeasure,
            retry_request=retry_request,
            **self._common(),
        )

    def exact(self, strategy: str = "oracle") -> ReplayOutcome:
        """Return the row of jobs that ask for exactly what they used."""
        return replay(strategy, ReplayCase(requested=self.used, **self._common()))


def _per_task(task: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """Return, per job, the flag of its task's first job."""
    code, order, starts, _ = task_index(task)
    return flag[order[starts]][code]
