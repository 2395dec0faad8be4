"""Derive JOBSARCHIVED4 records (scouts first, then regular jobs) from drawn tasks.

A job's measurements follow from its task's hidden needs, its site's core power and
per-job noise: MAXPSS from memory per core and base RAM, CPU time from HS06 seconds
per event, wall time from CPU time and CPU efficiency, bytes from the I/O rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from panda_predictor.core.replay.panda_rules import DEFAULT_MAX_ATTEMPTS
from pipelines.simulation.catalog import NULL, Catalog
from pipelines.simulation.tasks import TaskDraw

_TRF_URL = "http://pandaserver.cern.ch:25080/trf/user/"


def _lognormal(rng: np.random.Generator, sigma, size: int) -> np.ndarray:
    return np.exp(rng.normal(0.0, 1.0, size) * sigma)


def job_frame(
    rng: np.random.Generator,
    params: dict,
    cat: Catalog,
    draw: TaskDraw,
    transpath: np.ndarray,
    first_panda_id: int,
) -> tuple[pd.DataFrame, np.ndarray]:
    """Return the batch's job records and each task's last job end time.

    Parameters
    ----------
    transpath:
        The task's TRANSPATH per task (user jobs get the transformation's URL).
    first_panda_id:
        PANDAID of the first job; ids increase through the batch.
    """
    n_tasks = len(draw.task_id)
    n_jobs = draw.n_scouts + draw.n_regular
    m = int(n_jobs.sum())
    first_job = np.cumsum(n_jobs) - n_jobs
    t = np.repeat(np.arange(n_tasks), n_jobs)
    rank = np.arange(m) - first_job[t]
    scout = rank < draw.n_scouts[t]
    cc = draw.corecount[t]
    # The order of the draws below is the generator's: changing it changes the
    # simulated history of every seed.
    run = _measure(rng, params, cat, draw, t, scout)
    start_s, end_s, last_end = _schedule(rng, draw, t, scout, run.wall)

    maxpss = np.rint(
        run.mem_mb * 1024 * np.where(run.failed, run.cut**0.3, 1.0)
    ).astype(np.int64)
    per_core_mb = np.ceil(draw.mem_per_core_mb[t] * 1.1)
    minram = np.where(
        scout, 2000 * cc, per_core_mb * cc + np.where(cc > 1, draw.base_ram_mb[t], 0)
    )
    label = cat.ptype_strings["prodsourcelabel"][draw.ptype[t]]
    trf = transpath[t]
    frame = pd.DataFrame(
        {
            "pandaid": first_panda_id + np.arange(m, dtype=np.int64),
            "jeditaskid": draw.task_id[t],
            "jobstatus": np.where(run.failed, "failed", "finished").astype(object),
            "prodsourcelabel": label,
            "processingtype": cat.ptypes[draw.ptype[t]],
            "transformation": np.where(label == "user", _TRF_URL + trf, trf),
            "computingsite": cat.sites[run.site],
            "specialhandling": np.where(scout, "sj", NULL),
            "corecount": cc,
            "actualcorecount": cc,
            "nevents": np.where(run.failed, 0, run.nevents),
            "starttime": _to_datetime(start_s),
            "endtime": _to_datetime(end_s),
            "modificationtime": _to_datetime(end_s),
            "cpuconsumptiontime": np.rint(run.cpu_s + 0.5 * run.setup).astype(np.int64),
            "maxpss": maxpss,
            "maxrss": np.rint(maxpss * rng.uniform(1.02, 1.12, m)).astype(np.int64),
            "maxvmem": np.rint(maxpss * 1.6 + 500 * 1024).astype(np.int64),
            "inputfilebytes": run.in_bytes,
            "outputfilebytes": run.out_bytes,
            "hs06sec": np.rint(run.wall * cc * run.power).astype(np.int64),
            "totrbytes": np.rint(run.in_bytes * rng.uniform(1.0, 1.15, m)).astype(
                np.int64
            ),
            "totwbytes": np.rint(run.out_bytes * rng.uniform(1.0, 1.2, m)).astype(
                np.int64
            ),
            "minramcount": np.rint(minram).astype(np.int64),
            "maxwalltime": np.where(scout, 86400, np.rint(run.wall * 2 + 3600)).astype(
                np.int64
            ),
            "jobmetrics": None,
            # One attempt each: the history holds no retries, and a failed job is
            # not lost (JEDI's default maxAttempt is 3).
            "attemptnr": 1,
            "maxattempt": DEFAULT_MAX_ATTEMPTS,
        }
    )
    return frame, _to_datetime(last_end)


@dataclass
class _Measured:
    """Per job: where it ran and what it used (failed jobs stop early)."""

    site: np.ndarray
    power: np.ndarray
    nevents: np.ndarray
    mem_mb: np.ndarray
    cpu_s: np.ndarray
    setup: np.ndarray
    wall: np.ndarray
    failed: np.ndarray
    cut: np.ndarray
    in_bytes: np.ndarray
    out_bytes: np.ndarray


def _measure(
    rng: np.random.Generator,
    params: dict,
    cat: Catalog,
    draw: TaskDraw,
    t: np.ndarray,
    scout: np.ndarray,
) -> _Measured:
    """Draw each job's site, events, memory, CPU, wall time, outcome and bytes."""
    noise, outcomes = params["noise"], params["outcomes"]
    m = len(t)
    cc = draw.corecount[t]
    site = np.searchsorted(cat.site_cum_share, rng.random(m) * cat.site_cum_share[-1])
    site = np.minimum(site, len(cat.sites) - 1)
    power = cat.site_power[site]
    nevents = np.maximum(
        1, np.rint(draw.events_per_job[t] * rng.uniform(0.8, 1.0, m))
    ).astype(np.int64)

    mem_mb = (draw.base_ram_mb[t] + draw.mem_per_core_mb[t] * cc) * _lognormal(
        rng, noise["job_memory_sigma"], m
    )
    cpu_s = (
        draw.hs06_per_event[t]
        * nevents
        / power
        * _lognormal(rng, noise["job_cpu_sigma"], m)
    )
    eff = np.clip(
        draw.cpu_efficiency[t] * _lognormal(rng, noise["cpu_efficiency_sigma"], m),
        0.05,
        1.0,
    )
    setup = noise["setup_seconds"] * _lognormal(rng, 0.3, m)
    wall = cpu_s / (cc * eff) + setup

    status = draw.status[t]
    failed = rng.random(m) < outcomes["failed_job_share"]
    failed |= (status == "broken") & scout
    failed |= (status == "failed") & ~scout & (rng.random(m) < 0.5)
    # Failed jobs stop early: shorter, and they saw part of the memory and CPU.
    cut = np.where(failed, rng.uniform(0.05, 1.0, m), 1.0)
    wall, cpu_s = wall * cut, cpu_s * cut
    io_kb = draw.io_kb_per_s[t] * _lognormal(rng, noise["job_io_sigma"], m) * cc * wall
    in_frac = cat.ptype_values["input_fraction"][draw.ptype[t]]
    in_bytes = np.rint(io_kb * in_frac * 1024).astype(np.int64)
    out_bytes = np.where(failed, 0, np.rint(io_kb * (1 - in_frac) * 1024)).astype(
        np.int64
    )
    return _Measured(
        site,
        power,
        nevents,
        mem_mb,
        cpu_s,
        setup,
        wall,
        failed,
        cut,
        in_bytes,
        out_bytes,
    )


def _schedule(
    rng: np.random.Generator,
    draw: TaskDraw,
    t: np.ndarray,
    scout: np.ndarray,
    wall: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return each job's start and end and each task's last end (epoch seconds).

    Scouts start soon after creation; regular jobs after the last scout ended.
    """
    n_tasks = len(draw.task_id)
    m = len(t)
    created = draw.created.astype(np.int64)[t]
    scout_delay = 1800 * _lognormal(rng, 0.8, m)
    start_s = created + scout_delay
    end_s = start_s + wall
    scout_end = np.full(n_tasks, -np.inf)
    np.maximum.at(scout_end, t[scout], end_s[scout])
    regular_delay = 3600 * _lognormal(rng, 1.0, m)
    start_s = np.where(scout, start_s, scout_end[t] + regular_delay)
    end_s = start_s + wall
    last_end = np.full(n_tasks, -np.inf)
    np.maximum.at(last_end, t, end_s)
    return start_s, end_s, last_end


def _to_datetime(seconds: np.ndarray) -> np.ndarray:
    """Convert epoch seconds (float, -inf for none) to datetime64[us] (NaT for none)."""
    out = np.full(len(seconds), np.datetime64("NaT"), dtype="datetime64[us]")
    ok = np.isfinite(seconds)
    out[ok] = np.rint(seconds[ok]).astype(np.int64).astype("datetime64[s]")
    return out
