"""Replay a job log under an allocation strategy: what do scouts cost, what does a
prediction save?

Each job asks for the amount its strategy says (memory in MB per core, or time). A
job that gets less than it used fails: the failed attempt's core-hours are lost, the
job is delayed by that attempt and retried the way PanDA retries it (memory: panda-
server's steps and task-wide raise; time: one class up, above the top class double;
see :mod:`panda_predictor.core.replay_panda`). A job PanDA can give no more memory
is lost. A job that gets more than it used wastes the difference. With scouts, the
first jobs of a task run with a default request and the rest of the task waits for
them, then asks for the scouts' estimate; that wait is the time until the bulk of
the task can start. A strategy may also re-estimate a task once some of its jobs
finished (PanDA's second look, or "predict, then refine").

Pure numpy: the caller supplies per-job arrays (task code, used amount, run time,
cores) and the strategy's requests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from panda_predictor.core.replay_panda import (
    DEFAULT_N_SCOUTS,
    DEFAULT_SCOUT_MARGIN,
    ReplayRules,
    next_class_up,
    replay_task,
    task_groups,
)

__all__ = [
    "DEFAULT_N_SCOUTS",
    "DEFAULT_SCOUT_MARGIN",
    "ReplayOutcome",
    "ReplayRules",
    "next_class_up",
    "replay",
    "scout_plan",
    "tasks_from_bursts",
]


@dataclass(frozen=True)
class ReplayOutcome:
    """What one strategy cost over the replayed jobs.

    ``failed_job_rate`` counts jobs with at least one failed attempt,
    ``lost_job_rate`` jobs that never finished (PanDA could give them no more
    memory), ``retries_per_job`` the retried attempts per job. Lost hours are those
    of failed attempts; wasted hours the unused part of the successful ones.
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
        if name in ("requested", "cap"):
            continue
        if not np.all(np.isfinite(array) & (array >= 0)):
            raise ValueError(
                f"The '{name}' field must hold finite numbers >= 0. "
                f"Got {array[~(np.isfinite(array) & (array >= 0))][:3]} instead."
            )
    if not np.all(np.isfinite(out["requested"]) & (out["requested"] > 0)):
        raise ValueError("The 'requested' field must hold positive finite numbers.")
    if not np.all(out["cap"] > 0):
        raise ValueError("The 'cap' field must hold positive numbers (inf: no cap).")
    return out


def replay(
    strategy: str,
    resource: str,
    task: Any,
    used: Any,
    run_s: Any,
    cores: Any,
    requested: Any,
    ladder: Any,
    bulk_delay_s: Any = None,
    *,
    reestimate_after: Any = None,
    reestimate_floor: Any = None,
    cap: Any = None,
    rules: ReplayRules | None = None,
) -> ReplayOutcome:
    """Replay jobs that ask for ``requested`` of ``resource`` ("time" or "memory").

    A failed time attempt runs until its limit (``requested`` seconds); a failed
    memory attempt is assumed to run its whole run time before being killed (an upper
    bound: logs do not say when memory ran out). Jobs of a task are replayed in the
    given row order (see :func:`~panda_predictor.core.replay_panda.replay_task`).

    :param strategy: name reported with the result.
    :param resource: "time" (used/requested in s) or "memory" (MB per core).
    :param task: (n,) task codes.
    :param used: (n,) what each job used.
    :param run_s: (n,) each job's run time in seconds.
    :param cores: (n,) cores per job.
    :param requested: (n,) what the strategy asks for.
    :param ladder: ascending class values for time retries (and memory retries
        with ``rules.memory_retry="ladder"``).
    :param bulk_delay_s: (n,) per job, how long it waited for scouts (default 0).
    :param reestimate_after: (n,) per job, finished jobs of its task before the task
        is re-estimated (the task's first row counts; 0 or None: never).
    :param reestimate_floor: (n,) a re-estimated request is at least this share of
        the job's own request (default 0).
    :param cap: (n,) re-estimated requests never exceed it (default: no cap).
    :param rules: retry and re-estimate rules (default :class:`ReplayRules`).
    """
    if resource not in ("time", "memory"):
        raise ValueError(
            f"The 'resource' field must be 'time' or 'memory'. "
            f"Got {resource!r} instead."
        )
    rules = ReplayRules() if rules is None else rules
    n = np.asarray(used).size
    a = _check(
        {
            "task": task,
            "used": used,
            "run_s": run_s,
            "cores": cores,
            "requested": requested,
            "bulk_delay_s": np.zeros(n) if bulk_delay_s is None else bulk_delay_s,
            "reestimate_after": (
                np.zeros(n) if reestimate_after is None else reestimate_after
            ),
            "reestimate_floor": (
                np.zeros(n) if reestimate_floor is None else reestimate_floor
            ),
            "cap": np.full(n, np.inf) if cap is None else cap,
        }
    )
    if np.any(a["reestimate_after"] % 1):
        raise ValueError(
            "The 'reestimate_after' field must hold whole numbers of jobs. "
            f"Got {a['reestimate_after'][a['reestimate_after'] % 1 > 0][:3]} instead."
        )
    steps = np.sort(np.asarray(ladder, dtype=float))
    final = a["requested"].copy()
    attempts = np.zeros(n, dtype=int)
    lost = np.zeros(n, dtype=bool)
    lost_s = np.zeros(n)
    lost_mb_s = np.zeros(n)
    groups = task_groups(np.asarray(task))
    # Only tasks where a job fails or a re-estimate changes requests need the
    # job-by-job replay; the others keep their requests as they are.
    code = np.unique(np.asarray(task), return_inverse=True)[1].reshape(-1)
    needs = np.zeros(len(groups), dtype=bool)
    np.logical_or.at(needs, code, (a["requested"] < a["used"]))
    np.logical_or.at(needs, code, a["reestimate_after"] > 0)
    for k in np.flatnonzero(needs):
        rows = groups[k]
        out = replay_task(
            a["used"][rows],
            a["run_s"][rows],
            a["requested"][rows],
            resource,
            steps,
            rules,
            reestimate_after=int(a["reestimate_after"][rows[0]]),
            reestimate_floor=float(a["reestimate_floor"][rows[0]]),
            cap=a["cap"][rows] if cap is not None else None,
        )
        final[rows] = out.final_request
        attempts[rows] = out.failed_attempts
        lost[rows] = out.lost
        lost_s[rows] = out.lost_s
        lost_mb_s[rows] = out.lost_mb_s
    spare = np.where(lost, 0.0, final - a["used"])
    if resource == "time":
        wasted_core_h = float(np.sum(spare * a["cores"]) / 3600.0)
        wasted_gb_h = 0.0
    else:
        wasted_core_h = 0.0
        wasted_gb_h = float(np.sum(spare * a["cores"] * a["run_s"]) / 1024 / 3600)
    bulk = np.zeros(len(groups))
    np.maximum.at(bulk, code, a["bulk_delay_s"])
    return ReplayOutcome(
        strategy=strategy,
        n_jobs=int(n),
        n_tasks=len(groups),
        failed_job_rate=float((attempts > 0).mean()) if n else 0.0,
        lost_core_hours=float(np.sum(lost_s * a["cores"]) / 3600.0),
        wasted_core_hours=wasted_core_h,
        wasted_gb_hours=wasted_gb_h,
        mean_bulk_delay_hours=float(bulk.mean() / 3600.0) if groups else 0.0,
        mean_retry_delay_hours=float(lost_s.mean() / 3600.0) if n else 0.0,
        lost_job_rate=float(lost.mean()) if n else 0.0,
        lost_gb_hours=float(np.sum(lost_mb_s * a["cores"]) / 1024 / 3600),
        retries_per_job=float((attempts.sum() - lost.sum()) / n) if n else 0.0,
    )


def scout_plan(
    task: Any,
    used: Any,
    run_s: Any,
    default: Any,
    n_scouts: int = DEFAULT_N_SCOUTS,
    margin: float = DEFAULT_SCOUT_MARGIN,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (requested, bulk_delay_s) of the scouts strategy, rows in job order.

    In each task the first ``n_scouts`` jobs (all of them for a small task) are
    scouts asking for ``default``; every later job asks for the scouts' largest use
    times ``1 + margin`` and waits until the slowest scout finished (its run time,
    plus the time lost if a scout had to be retried is ignored: a lower bound).
    """
    task = np.asarray(task)
    used = np.asarray(used, dtype=float)
    run_s = np.asarray(run_s, dtype=float)
    requested = np.broadcast_to(np.asarray(default, dtype=float), used.shape).copy()
    delay = np.zeros(used.size)
    if n_scouts < 1:
        raise ValueError(f"The 'n_scouts' field must be >= 1. Got {n_scouts!r}.")
    for rows in task_groups(task):
        if rows.size <= n_scouts:
            continue
        scouts, bulk = rows[:n_scouts], rows[n_scouts:]
        requested[bulk] = max(float(used[scouts].max()) * (1.0 + margin), 1e-9)
        delay[bulk] = float(run_s[scouts].max())
    return requested, delay


def tasks_from_bursts(submit: Any, key: Any, gap_s: float = 3600.0) -> np.ndarray:
    """Group jobs into tasks: consecutive jobs of one key submitted within ``gap_s``.

    Logs of batch systems have no task id; a burst of jobs of the same user and
    executable is the closest thing to a PanDA task. Returns a task code per job.
    """
    submit = np.asarray(submit, dtype=float)
    key = np.asarray(key)
    order = np.lexsort((submit, key))
    new = np.ones(submit.size, dtype=bool)
    same_key = key[order][1:] == key[order][:-1]
    close = np.diff(submit[order]) <= gap_s
    new[1:] = ~(same_key & close)
    codes = np.empty(submit.size, dtype=np.int64)
    codes[order] = np.cumsum(new) - 1
    return codes
