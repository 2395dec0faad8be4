"""Draw simulated tasks: their PanDA attributes and their hidden resource needs.

Everything is vectorised over a batch of tasks; the hidden values (memory per core,
HS06 seconds per event, I/O rate, ...) stay in :class:`TaskDraw` and only show through
the job records that :mod:`pipelines.simulation.jobs` derives from them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipelines.simulation.catalog import NULL, Catalog, choose_rows
from pipelines.simulation.config import DEFAULT_END_DATE, SimulationConfig

SECONDS_PER_MONTH = 30.44 * 86400
_SAMPLES = np.array(
    [
        "PhPy8EG_A14_ttbar_hdamp258p75_nonallhad",
        "Sh_2214_Zee_maxHTpTV2_BFilter",
        "Py8EG_A14NNPDF23LO_jetjet_JZ4",
        "MGPy8EG_HHbbtautau_SM",
        "PhPy8EG_AZNLO_Wmunu",
        "Epos_minbias_inelastic_lowjetphoton",
        "physics_Main",
        "Sh_2214_ttW",
    ],
    dtype=object,
)


@dataclass
class TaskDraw:
    """One batch of tasks: public attributes and hidden truth, as parallel arrays."""

    task_id: np.ndarray
    created: np.ndarray  # datetime64[s]
    month: np.ndarray  # month index since the start of the period
    ptype: np.ndarray  # index into Catalog.ptypes
    release: np.ndarray  # index into Catalog.rel_*
    corecount: np.ndarray
    status: np.ndarray  # object array of task statuses
    n_scouts: np.ndarray
    n_regular: np.ndarray
    events_per_job: np.ndarray
    input_files: np.ndarray
    input_events: np.ndarray
    # hidden truth
    mem_per_core_mb: np.ndarray
    base_ram_mb: np.ndarray
    hs06_per_event: np.ndarray
    cpu_efficiency: np.ndarray
    io_kb_per_s: np.ndarray
    giant: np.ndarray  # 0 none, 1 memory giant, 2 CPU giant


def layout_shift(cfg: SimulationConfig) -> np.timedelta64:
    """Return how far the history is moved from its layout to end at ``end_date``.

    Every draw is made for a history ending at :data:`DEFAULT_END_DATE` (its
    calendar months, its period length), then moved by this much. So a seed gives
    the same tasks and jobs whatever the end; only their times move. Without it
    the period's length and month boundaries, and so the tasks, changed with the
    end date, and the demo trained a different model every day.
    """
    return np.datetime64(cfg.end_date, "s") - np.datetime64(DEFAULT_END_DATE, "s")


def _layout_start(cfg: SimulationConfig) -> np.datetime64:
    start = pd.Timestamp(DEFAULT_END_DATE) - pd.DateOffset(months=cfg.months)
    return np.datetime64(start.to_pydatetime(), "s")


def period_start(cfg: SimulationConfig) -> np.datetime64:
    """Return the first instant of the simulated period (``months`` calendar months
    before :data:`DEFAULT_END_DATE`, moved by :func:`layout_shift`)."""
    return _layout_start(cfg) + layout_shift(cfg)


def creation_times(
    rng: np.random.Generator, cfg: SimulationConfig, positions: np.ndarray, new: bool
) -> np.ndarray:
    """Return increasing creation times over the period (or the day after it)."""
    end = np.datetime64(cfg.end_date, "s")
    start: np.datetime64
    if new:
        span, start, total = 86400.0, end, cfg.n_defined
    else:
        start = period_start(cfg)
        span, total = float((end - start).astype(np.int64)), cfg.n_tasks
    offsets = span * (positions + rng.random(len(positions))) / total
    return start + offsets.astype("timedelta64[s]")


def _month_index(created: np.ndarray, cfg: SimulationConfig) -> np.ndarray:
    """Return each task's month of the period, counted on the layout's calendar."""
    laid_out = created - layout_shift(cfg)
    first = _layout_start(cfg).astype("datetime64[M]")
    return (laid_out.astype("datetime64[M]") - first).astype(np.int64)


def _lognormal(rng: np.random.Generator, sigma, size: int) -> np.ndarray:
    return np.exp(rng.normal(0.0, 1.0, size) * sigma)


def _choose_release(
    rng: np.random.Generator,
    cat: Catalog,
    cfg: SimulationConfig,
    framework: np.ndarray,
    frac: np.ndarray,
    month: np.ndarray,
) -> np.ndarray:
    same_fw = cat.rel_framework[None, :] == framework[:, None]
    first_of_fw = np.zeros(len(cat.rel_from), dtype=bool)
    for fw in np.unique(cat.rel_framework):
        idx = np.flatnonzero((cat.rel_framework == fw) & ~cat.rel_is_drift)
        first_of_fw[idx[np.argmin(cat.rel_from[idx])]] = True
    open_ = (cat.rel_from[None, :] <= frac[:, None]) | first_of_fw[None, :]
    usable = same_fw & open_ & ~cat.rel_is_drift[None, :]
    age = np.clip(frac[:, None] - cat.rel_from[None, :], 0, None) * cfg.months
    weights = np.where(usable, 0.5 ** (age / cat.halflife_months), 0.0)
    release = choose_rows(rng, weights)
    drift = cfg.drift_event
    if drift is not None:
        drift_rel = int(np.flatnonzero(cat.rel_is_drift)[0])
        takes = (
            (framework == cat.rel_framework[drift_rel])
            & (month >= drift.start_month)
            & (rng.random(len(framework)) < drift.share)
        )
        release = np.where(takes, drift_rel, release)
    return release


def draw_tasks(
    rng: np.random.Generator,
    cfg: SimulationConfig,
    cat: Catalog,
    first_task_id: int,
    positions: np.ndarray,
    new: bool,
) -> TaskDraw:
    """Draw a batch of tasks at global ``positions`` (history, or newly defined)."""
    n = len(positions)
    pv = cat.ptype_values
    created = creation_times(rng, cfg, positions, new)
    month = _month_index(created, cfg)
    frac = np.clip(month / cfg.months, 0.0, 1.0)

    mix = pv["weight"][None, :] * np.exp(pv["trend"][None, :] * (frac[:, None] - 0.5))
    ptype = choose_rows(rng, mix)
    framework = choose_rows(rng, cat.framework_probs[ptype])
    release = _choose_release(rng, cat, cfg, framework, frac, month)
    corecount = np.where(rng.random(n) < pv["multicore_share"][ptype], 8, 1)

    # The order of the draws below is the generator's: changing it changes the
    # simulated history of every seed.
    giant, mem, base_ram, hs06, eff, io = _hidden_needs(
        rng, cfg, cat, ptype, release, n
    )
    files, events, per_job = _input_sizes(rng, cfg, cat, ptype, corecount)
    status, n_scouts, n_regular = _statuses(rng, cfg, n, new)

    return TaskDraw(
        task_id=first_task_id + positions.astype(np.int64),
        created=created,
        month=month,
        ptype=ptype,
        release=release,
        corecount=corecount,
        status=status,
        n_scouts=n_scouts.astype(np.int64),
        n_regular=n_regular.astype(np.int64),
        events_per_job=per_job,
        input_files=files,
        input_events=events,
        mem_per_core_mb=mem,
        base_ram_mb=base_ram,
        hs06_per_event=hs06,
        cpu_efficiency=eff,
        io_kb_per_s=io,
        giant=giant,
    )


def _hidden_needs(
    rng: np.random.Generator,
    cfg: SimulationConfig,
    cat: Catalog,
    ptype: np.ndarray,
    release: np.ndarray,
    n: int,
) -> tuple[np.ndarray, ...]:
    """Draw the hidden truth: giants, memory, base RAM, HS06, efficiency and I/O."""
    pv, noise, params = cat.ptype_values, cfg.params["noise"], cfg.params
    giants = params["giants"]
    giant_u = rng.random(n)
    giant = np.where(giant_u < giants["share"], 1 + (giant_u < giants["share"] / 2), 0)
    factor = rng.uniform(giants["factor_min"], giants["factor_max"], n)
    mem_giant = np.where(giant == 1, factor, 1.0)
    cpu_giant = np.where(giant == 2, factor, 1.0)
    drift_mem = np.ones(n)
    if cfg.drift_event is not None:
        drift_mem = np.where(
            cat.rel_is_drift[release], cfg.drift_event.memory_factor, 1.0
        )

    mem = (
        pv["mem_per_core_mb"][ptype]
        * cat.rel_memory[release]
        * drift_mem
        * mem_giant
        * _lognormal(rng, noise["task_memory_sigma"], n)
    )
    base_ram = pv["base_ram_mb"][ptype] * _lognormal(rng, 0.1, n)
    hs06 = (
        pv["hs06_per_event"][ptype]
        * cat.rel_cpu[release]
        * cpu_giant
        * _lognormal(rng, pv["hs06_sigma"][ptype], n)
    )
    eff = np.clip(pv["cpu_efficiency"][ptype] * _lognormal(rng, 0.05, n), 0.05, 1.0)
    io = pv["io_kb_per_s"][ptype] * _lognormal(rng, noise["task_io_sigma"], n)
    return giant, mem, base_ram, hs06, eff, io


def _input_sizes(
    rng: np.random.Generator,
    cfg: SimulationConfig,
    cat: Catalog,
    ptype: np.ndarray,
    corecount: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw each task's input files, input events and events per job."""
    pv, noise = cat.ptype_values, cfg.params["noise"]
    n = len(ptype)
    files = np.maximum(
        1,
        np.rint(
            pv["files_per_dataset"][ptype]
            * _lognormal(rng, pv["files_sigma"][ptype], n)
        ),
    ).astype(np.int64)
    per_file = pv["events_per_file"][ptype] * _lognormal(
        rng, noise["events_per_file_sigma"], n
    )
    events = np.maximum(files, np.rint(files * per_file)).astype(np.int64)
    per_job = pv["events_per_job"][ptype] * _lognormal(
        rng, noise["events_per_job_sigma"], n
    )
    per_job = np.clip(np.rint(per_job), 10 * corecount, None).astype(np.int64)
    return files, events, per_job


def _statuses(
    rng: np.random.Generator, cfg: SimulationConfig, n: int, new: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw each task's status and its numbers of scout and regular jobs.

    A newly defined task waits for the hook (no jobs yet); a broken one ran only
    its scouts.
    """
    outcomes = cfg.params["outcomes"]
    u = rng.random(n)
    if new:
        status = np.where(u < 0.5, "defined", "ready").astype(object)
    else:
        cut = np.cumsum(
            [
                outcomes["failed_task_share"],
                outcomes["broken_task_share"],
                outcomes["finished_task_share"],
            ]
        )
        status = np.select(
            [u < cut[0], u < cut[1], u < cut[2]],
            ["failed", "broken", "finished"],
            "done",
        ).astype(object)
    n_scouts = rng.integers(cfg.scouts_min, cfg.scouts_max + 1, n)
    n_regular = rng.integers(cfg.regular_min, cfg.regular_max + 1, n)
    if new:
        n_scouts = np.zeros(n, dtype=np.int64)
        n_regular = np.zeros(n, dtype=np.int64)
    n_regular = np.where(status == "broken", 0, n_regular)
    return status, n_scouts, n_regular


def _s(values) -> np.ndarray:
    """Return ``values`` as an object array of Python strings, for vectorised '+'."""
    return np.asarray(values).astype(str).astype(object)


def task_names(rng: np.random.Generator, cat: Catalog, draw: TaskDraw) -> dict:
    """Return PanDA-like names: task name, user name, sample and dataset stem."""
    n = len(draw.task_id)
    user = cat.ptype_strings["prodsourcelabel"][draw.ptype] == "user"
    reproc = cat.ptypes[draw.ptype] == "reprocessing"
    project = np.where(reproc, "data24_13p6TeV", "mc23_13p6TeV").astype(object)
    sample = _SAMPLES[rng.integers(0, len(_SAMPLES), n)]
    dsid = _s(rng.integers(500_000, 900_000, n))
    # Zipf-like: a few users submit most analysis tasks.
    users = "user" + _s(np.minimum(rng.zipf(1.6, n), 3000)).astype(object)
    prod = "prod_manager_0" + _s(rng.integers(1, 9, n))
    username = np.where(user, users, prod)
    stem = project + "." + dsid + "." + sample
    step = cat.ptypes[draw.ptype].astype(object) + "."
    fmt = cat.ptype_strings["output_format"][draw.ptype]
    tid = _s(draw.task_id)
    taskname = np.where(
        user,
        "user." + username + "." + dsid + "." + sample + ".v" + tid + "/",
        stem + "." + step + fmt + ".tid" + tid,
    )
    return {"taskname": taskname, "username": username, "stem": stem, "tid": tid}


def task_transpath(cat: Catalog, draw: TaskDraw) -> np.ndarray:
    """Return TRANSPATH per task: the type's transformation, or runAthena."""
    fw = cat.frameworks[cat.rel_framework[draw.release]]
    user = cat.ptype_strings["prodsourcelabel"][draw.ptype] == "user"
    default = cat.ptype_strings["transpath"][draw.ptype]
    return np.where(user & (fw == "Athena"), "runAthena-00-00-12", default)


def _campaign(rng: np.random.Generator, cat: Catalog, month, months) -> np.ndarray:
    frac = np.clip(month / months, 0, 1)
    idx = np.searchsorted(cat.campaign_from, frac, side="right") - 1
    idx = np.maximum(0, idx - (rng.random(len(month)) < 0.15))
    return cat.campaigns[idx]


def task_frame(
    rng: np.random.Generator,
    cfg: SimulationConfig,
    cat: Catalog,
    draw: TaskDraw,
    names: dict,
    modified: np.ndarray,
) -> pd.DataFrame:
    """Return the JEDI_TASKS rows of a batch (resource columns filled by the caller)."""
    s = cat.ptype_strings
    label = s["prodsourcelabel"][draw.ptype]
    user = label == "user"
    fw = cat.frameworks[cat.rel_framework[draw.release]]
    version = cat.rel_version[draw.release]
    transpath = task_transpath(cat, draw)
    multicore = draw.corecount > 1
    new = draw.n_scouts.sum() == 0
    frame = pd.DataFrame(
        {
            "jeditaskid": draw.task_id,
            "taskname": names["taskname"],
            "status": draw.status,
            "username": names["username"],
            "creationdate": draw.created.astype("datetime64[us]"),
            "modificationtime": modified.astype("datetime64[us]"),
            "prodsourcelabel": label,
            "workinggroup": np.where(user, NULL, s["workinggroup"][draw.ptype]),
            "vo": "atlas",
            "corecount": draw.corecount,
            "tasktype": s["tasktype"][draw.ptype],
            "processingtype": cat.ptypes[draw.ptype],
            "architecture": cat.rel_arch[draw.release],
            "transuses": "Atlas-" + version,
            "transhome": fw + "-" + version,
            "transpath": transpath,
            "splitrule": "NG=1,US=2,MF=1" if new else "NG=1,US=3,MF=1",
            "baseramcount": np.where(multicore, np.rint(draw.base_ram_mb), 0).astype(
                np.int64
            ),
            "cpuefficiency": 90,
            "basewalltime": 600,
            "campaign": np.where(
                user, NULL, _campaign(rng, cat, draw.month, cfg.months)
            ),
            "gshare": s["gshare"][draw.ptype],
            "resource_type": np.where(multicore, "MCORE", "SCORE"),
            "framework": np.where(
                user, np.where(fw == "Athena", "pathena", "prun"), "prodsys"
            ),
        }
    )
    return frame
