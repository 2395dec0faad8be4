"""Group a log's jobs into tasks, and say where each job stands in its task.

Logs of batch systems have no task id, so the replay makes tasks from bursts of one
key (:func:`tasks_from_bursts`) and then needs, per job, its task's size, its place
in the task and how long it waits for the task's scouts. One index of the task codes
(:func:`task_index`) gives all of them, so the replay (:mod:`.engine`) and the
reports that explain it group the jobs the same way.

Pure numpy: rows are jobs in job order; a task code is any sortable value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from panda_predictor.core.replay.panda_rules import DEFAULT_N_SCOUTS


def task_index(task: np.ndarray) -> tuple[np.ndarray, ...]:
    """Return (code per job, rows by task, first position and size of each task).

    Tasks are numbered in sorted order and keep their rows' given order, as
    :func:`~panda_predictor.core.replay.panda_rules.task_groups` does.
    """
    code = np.unique(task, return_inverse=True)[1].reshape(-1)
    order = np.argsort(code, kind="stable")
    sizes = np.bincount(code) if code.size else np.zeros(0, dtype=np.int64)
    starts = np.cumsum(sizes) - sizes
    return code, order, starts, sizes


def job_rank(task: Any) -> np.ndarray:
    """Return, per job, its place in its task: 0 for a task's first row, 1 for its
    second, ... (rows in job order, as the replay walks them)."""
    task = np.asarray(task)
    code, order, starts, sizes = task_index(task)
    rank = np.empty(task.size, dtype=np.int64)
    rank[order] = np.arange(task.size) - np.repeat(starts, sizes)
    return rank


def task_size(task: Any) -> np.ndarray:
    """Return, per job, how many jobs its task has (the replay's own count)."""
    code, _, _, sizes = task_index(np.asarray(task))
    return sizes[code]


def scout_delay(task: Any, run_s: Any, n_scouts: Any = DEFAULT_N_SCOUTS) -> np.ndarray:
    """Return, per job, how long it waits for its task's scouts (rows in job order).

    In each task the first ``n_scouts`` jobs (all of them for a small task) are
    scouts and wait for nothing; every later job waits until the slowest scout
    finished (its run time; time lost to a retried scout is ignored: a lower
    bound). ``n_scouts`` is one number or, per job, its task's (first row counts).
    """
    task = np.asarray(task)
    run_s = np.asarray(run_s, dtype=float)
    counts = np.broadcast_to(np.asarray(n_scouts), task.shape)
    if task.size and (np.any(counts < 1) or np.any(counts % 1)):
        raise ValueError(
            f"The 'n_scouts' field must hold integers >= 1. Got {n_scouts!r} instead."
        )
    code, order, starts, sizes = task_index(task)
    rank = job_rank(task)
    scout = rank < counts[order[starts]][code]
    slowest = np.zeros(sizes.size)
    np.maximum.at(slowest, code[scout], run_s[scout])
    return np.where(scout, 0.0, slowest[code])


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
