"""Replay a job log under an allocation strategy: what do scouts cost, what does a
prediction save?

Each job asks for the amount its strategy says (memory or time). A job that gets
less than it used fails: the failed attempt's core-hours are lost, the job is
delayed by that attempt and retried one class up (above the top class, the request
doubles). A job that gets more wastes the difference. With scouts, the first jobs of
a task run with a default request and the rest of the task waits for them, then asks
for the scouts' estimate; that wait is the time until the bulk of the task can start.

Pure numpy: the caller supplies per-job arrays (task code, used amount, run time,
cores) and the strategy's requests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: Scout jobs per task (PanDA sends about 10 per task; trace "tasks" are smaller).
DEFAULT_N_SCOUTS = 3
#: Margin the scout estimate adds over the largest scout's use (PanDA: 10 % on RAM).
DEFAULT_SCOUT_MARGIN = 0.10


@dataclass(frozen=True)
class ReplayOutcome:
    """What one strategy cost over the replayed jobs."""

    strategy: str
    n_jobs: int
    n_tasks: int
    failed_job_rate: float
    lost_core_hours: float
    wasted_core_hours: float
    wasted_gb_hours: float
    mean_bulk_delay_hours: float
    mean_retry_delay_hours: float

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
        if name != "requested" and not np.all(np.isfinite(array) & (array >= 0)):
            raise ValueError(
                f"The '{name}' field must hold finite numbers >= 0. "
                f"Got {array[~(np.isfinite(array) & (array >= 0))][:3]} instead."
            )
    if not np.all(np.isfinite(out["requested"]) & (out["requested"] > 0)):
        raise ValueError("The 'requested' field must hold positive finite numbers.")
    return out


def next_class_up(request: np.ndarray, ladder: np.ndarray) -> np.ndarray:
    """Return the smallest ladder value above each request (above the top: double)."""
    idx = np.searchsorted(ladder, request, side="right")
    top = idx >= ladder.size
    return np.where(top, request * 2.0, ladder[np.minimum(idx, ladder.size - 1)])


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
) -> ReplayOutcome:
    """Replay jobs that ask for ``requested`` of ``resource`` ("time" or "memory").

    A failed time attempt runs until its limit (``requested`` seconds); a failed
    memory attempt is assumed to run its whole run time before being killed (an upper
    bound: logs do not say when memory ran out).

    :param strategy: name reported with the result.
    :param resource: "time" (used/requested in s) or "memory" (MB per core).
    :param task: (n,) task codes.
    :param used: (n,) what each job used.
    :param run_s: (n,) each job's run time in seconds.
    :param cores: (n,) cores per job.
    :param requested: (n,) what the strategy asks for.
    :param ladder: ascending class values used for "retry one class up".
    :param bulk_delay_s: (n,) per job, how long it waited for scouts (default 0).
    """
    if resource not in ("time", "memory"):
        raise ValueError(
            f"The 'resource' field must be 'time' or 'memory'. "
            f"Got {resource!r} instead."
        )
    n = np.asarray(used).size
    delay = np.zeros(n) if bulk_delay_s is None else bulk_delay_s
    a = _check(
        {
            "task": task,
            "used": used,
            "run_s": run_s,
            "cores": cores,
            "requested": requested,
            "bulk_delay_s": delay,
        }
    )
    steps = np.sort(np.asarray(ladder, dtype=float))
    request = a["requested"].copy()
    failed = np.zeros(n, dtype=bool)
    lost_s = np.zeros(n)
    retry_delay = np.zeros(n)
    short = request < a["used"]
    while short.any():
        failed |= short
        attempt = request[short] if resource == "time" else a["run_s"][short]
        lost_s[short] += attempt
        retry_delay[short] += attempt
        request[short] = next_class_up(request[short], steps)
        short = request < a["used"]
    spare = request - a["used"]
    if resource == "time":
        wasted_core_h = float(np.sum(spare * a["cores"]) / 3600.0)
        wasted_gb_h = 0.0
    else:
        wasted_core_h = 0.0
        wasted_gb_h = float(np.sum(spare * a["cores"] * a["run_s"]) / 1024 / 3600)
    tasks, first = np.unique(a["task"], return_index=True)
    bulk = np.zeros(tasks.size)
    np.maximum.at(bulk, np.searchsorted(tasks, a["task"]), a["bulk_delay_s"])
    return ReplayOutcome(
        strategy=strategy,
        n_jobs=int(n),
        n_tasks=int(tasks.size),
        failed_job_rate=float(failed.mean()) if n else 0.0,
        lost_core_hours=float(np.sum(lost_s * a["cores"]) / 3600.0),
        wasted_core_hours=wasted_core_h,
        wasted_gb_hours=wasted_gb_h,
        mean_bulk_delay_hours=float(bulk.mean() / 3600.0) if tasks.size else 0.0,
        mean_retry_delay_hours=float(retry_delay.mean() / 3600.0) if n else 0.0,
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
    order = np.argsort(task, kind="stable")
    bounds = np.flatnonzero(np.diff(task[order])) + 1
    for rows in np.split(order, bounds):
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
