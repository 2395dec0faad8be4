"""Run the newly defined tasks after the submit hook: their simulated job records.

THIS IS A SIMULATION. The hook decided, per new task, to write its predictions
(``applied``: no scouts, the jobs ask for the memory written) or to keep the scouts
(PanDA's usual 2 GB per core scouts, then jobs sized from them). The simulator knows
each task's hidden true needs, so its jobs show what that decision did: a job whose
memory need exceeds the request fails at the limit, as a batch system kills it. The
feedback loop then has outcomes to score, as it would after a day in production.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import fields, replace

import numpy as np
import pandas as pd

from pipelines.simulation.config import SimulationConfig
from pipelines.simulation.generator import newly_defined_draws
from pipelines.simulation.jobs import job_frame
from pipelines.simulation.tasks import TaskDraw

#: Third stream of the seed (0 history, 1 new tasks): jobs run after the hook.
_AFTER_HOOK = 2


def _subset(draw: TaskDraw, chosen: np.ndarray) -> TaskDraw:
    """Return the tasks of ``draw`` where ``chosen`` is True (all arrays cut alike)."""
    return TaskDraw(**{f.name: getattr(draw, f.name)[chosen] for f in fields(draw)})


def limit_memory(jobs: pd.DataFrame, request_mb: pd.Series) -> pd.DataFrame:
    """Return ``jobs`` asking for ``request_mb`` each; those needing more fail at it.

    Parameters
    ----------
    jobs:
        JOBSARCHIVED4 rows (MAXPSS in kB).
    request_mb:
        Memory request per job (MB), aligned with ``jobs``; NaN keeps the job as is.
    """
    out = jobs.copy()
    has = request_mb.notna().to_numpy()
    request = request_mb.to_numpy(dtype=float)
    over = has & (out["maxpss"].to_numpy(dtype=float) / 1024.0 > request)
    out.loc[has, "minramcount"] = np.rint(request[has]).astype(np.int64)
    killed_kb = np.rint(request[over] * 1024).astype(np.int64)
    out.loc[over, "jobstatus"] = "failed"
    out.loc[over, "maxpss"] = killed_kb
    out.loc[over, "maxrss"] = killed_kb
    out.loc[over, "nevents"] = 0
    out.loc[over, "outputfilebytes"] = 0
    return out


def jobs_after_hook(
    config: SimulationConfig,
    applied_ramcount: Mapping[int, float],
    kept_scouts: Collection[int],
    first_panda_id: int,
) -> pd.DataFrame:
    """Return the job records of new tasks that ran after the hook decided on them.

    Parameters
    ----------
    config:
        The configuration that simulated the history (same seed, same new tasks).
    applied_ramcount:
        Per applied task, the RAMCOUNT written (MB per core): its jobs ask for that
        times their cores and run without scouts.
    kept_scouts:
        Tasks that kept their scouts: scouts first, then regular jobs.
    first_panda_id:
        PANDAID of the first job (above every id already in the database).
    """
    frames = []
    wanted = set(applied_ramcount) | set(kept_scouts)
    for index, (cat, draw, transpath) in enumerate(newly_defined_draws(config)):
        chosen = np.isin(draw.task_id, list(wanted))
        if not chosen.any():
            continue
        tasks = _subset(draw, chosen)
        n = len(tasks.task_id)
        rng = np.random.default_rng(
            np.random.SeedSequence([config.seed, _AFTER_HOOK, index])
        )
        applied = np.isin(tasks.task_id, list(applied_ramcount))
        scouts = rng.integers(config.scouts_min, config.scouts_max + 1, n)
        tasks = replace(
            tasks,
            status=np.full(n, "running", dtype=object),
            n_scouts=np.where(applied, 0, scouts).astype(np.int64),
            n_regular=rng.integers(config.regular_min, config.regular_max + 1, n),
        )
        jobs, _ = job_frame(
            rng, config.params, cat, tasks, transpath[chosen], first_panda_id
        )
        first_panda_id += len(jobs)
        per_core = jobs["jeditaskid"].map(applied_ramcount).astype(float)
        frames.append(limit_memory(jobs, per_core * jobs["corecount"]))
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)
