"""Turn a task's finished scout jobs into the four labels PanDA itself would compute.

The formulas (ramcount in MBPerCore, cputime in HS06sPerEvent, walltime in
kSI2kseconds, iointensity in kBPerS) are JEDI's scout measurement; ``docs/labels.md``
states them with a worked example, :class:`LabelParams` holds their constants.

:func:`labels_frame` computes them for millions of tasks (numpy over whole columns,
no loop per task) and finishes with :func:`finalize_labels`, which
:mod:`panda_predictor.db.labels_sql` also uses on its SQL aggregates, so the rounding
is the same everywhere. A plain-Python reference for one task, which the tests hold
:func:`labels_frame` to, lives in ``tests/labels_reference.py``.

Missing labels: a task without finished scout jobs gets ``NaN`` for every normalised
label, ``None``/``<NA>`` for every PanDA value and unit, ``n_scouts == 0`` and no
``labels_known_at``. A task with scouts can still lack one label (e.g. no scout passes
the nEvents filter -> no ``cputime``); that label alone is NaN/None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.domain.targets import TARGET_NAMES, TARGETS
from panda_predictor.core.domain.units import MILLI_CPUTIME_UNIT, cputime_to_panda

#: Unit written with each label (cputime switches to MILLI_CPUTIME_UNIT below 10).
LABEL_UNITS = {name: target.unit for name, target in TARGETS.items()}
# fmt: off
#: Columns of JOBSARCHIVED4 (lower-case) the labels read.
JOB_COLUMNS = (
    "jeditaskid", "jobstatus", "specialhandling", "corecount", "actualcorecount",
    "nevents", "starttime", "endtime", "cpuconsumptiontime", "maxpss",
    "inputfilebytes", "outputfilebytes", "hs06sec",
)
#: Columns of JEDI_TASKS (lower-case) the labels read.
TASK_COLUMNS = (
    "jeditaskid", "baseramcount", "cpuefficiency", "basewalltime", "ramunit",
    "cputimeunit",
)
# fmt: on
#: Per-job columns from the job's files in JEDI_DATASET_CONTENTS (NULL: no files
#: there): master input size in MB (``CoreUtils.getEffectiveFileSize`` summed), events
#: (``getEffectiveNumEvents`` summed) and 1 if a file was ``pseudo_input``, else 0.
#: Where known they replace the job's INPUTFILEBYTES (walltime, iointensity) and
#: NEVENTS (cputime), as ``getScoutJobData_JEDI`` reads them.
INPUT_COLUMNS = ("master_input_mb", "master_nevents", "pseudo_input")
#: JEDI_DATASET_CONTENTS.STATUS of a file its job has processed.
FINISHED_FILE = "finished"
#: File types of a job's input in JEDI_DATASET_CONTENTS, and the pseudo one.
INPUT_FILE_TYPES, PSEUDO_INPUT_TYPE = ("input", "pseudo_input"), "pseudo_input"
#: Bytes of an input MB; a file without a size counts one (getEffectiveFileSize).
BYTES_PER_INPUT_MB = 1024.0 * 1024.0
#: Columns :func:`labels_frame` can do without, and the value an absent one stands
#: for: frames that are not PanDA rows (hand-made jobs, the feedback's first jobs)
#: mean "no ACTUALCORECOUNT" and "the task asked for the units the model predicts".
#: A present column's NULL keeps PanDA's meaning (RAMUNIT NULL -> ramCount in MB).
OPTIONAL_COLUMNS = {
    **dict.fromkeys(INPUT_COLUMNS),
    "actualcorecount": None,
    "ramunit": "MBPerCore",
    "cputimeunit": "HS06sPerEvent",
}
#: RAMUNIT values of getScoutJobData_JEDI: per core, and per core never overwritten.
RAM_PER_CORE_UNIT, RAM_FIXED_UNIT = "MBPerCore", "MBPerCoreFixed"
#: The unit PanDA writes for a ramCount that is not per core (raw maxPSS).
RAM_TOTAL_UNIT = "MB"
#: Columns of the frame :func:`labels_frame` returns, in order.
LABEL_COLUMNS = (
    "jeditaskid",
    *TARGET_NAMES,
    *(f"{name}_{part}" for name in TARGET_NAMES for part in ("value", "unit")),
    "n_scouts",
    "labels_known_at",
)


@dataclass(frozen=True)
class LabelParams:
    """The constants of PanDA's scout formulas; defaults are JEDI's.

    Parameters
    ----------
    scout_flag:
        Token in a job's comma-separated SPECIALHANDLING that marks a scout job.
    finished_status:
        JOBSTATUS of the jobs that count.
    ram_quantile, ram_margin, min_ramcount:
        ramcount = int(quantile(per-job kB) * percent // 100 / 1024) with percent =
        round(margin * 100), rounded DOWN as PanDA does; below 0 it becomes 1, and a
        ``min_ramcount`` above it replaces it (PanDA's config ``SCOUT_RAMCOUNT_MIN``;
        0 = no floor, as PanDA without that setting). 0.75, 1.10 and 0.
    cpu_quantile, cpu_margin:
        cputime = quantile(per-job HS06s/event) * margin; 0.95 and 1.5.
    cpu_min_events_per_core, cpu_long_job_s:
        A job counts for cputime if nevents >= 10 * cores or it ran > 21600 s (6 h).
    milli_threshold:
        A cputime below this (10 HS06sPerEvent) is stored x1000 in mHS06sPerEvent.
    default_core_power, default_cpu_efficiency, default_base_walltime:
        HS06 per core when HS06SEC is unknown (10), CPU efficiency in percent when the
        task has none (90), base walltime in s when the task has none (600).
    walltime_margin, walltime_min_cpu_s:
        walltime = ceil(max CPU s / max input MB * 1.5); 0 if max CPU s < 3600.
    bytes_per_mb:
        Size of an input MB for walltime (2**20, as JEDI divides by 1024 twice).
    """

    scout_flag: str = "sj"
    finished_status: str = "finished"
    ram_quantile: float = 0.75
    ram_margin: float = 1.10
    min_ramcount: int = 0
    cpu_quantile: float = 0.95
    cpu_margin: float = 1.5
    cpu_min_events_per_core: int = 10
    cpu_long_job_s: float = 6 * 3600.0
    milli_threshold: float = 10.0
    default_core_power: float = 10.0
    default_cpu_efficiency: float = 90.0
    default_base_walltime: float = 600.0
    walltime_margin: float = 1.5
    walltime_min_cpu_s: float = 3600.0
    bytes_per_mb: float = 1024.0 * 1024.0


#: JEDI's constants, the default of every function here.
DEFAULT_LABEL_PARAMS = LabelParams()


def finalize_labels(
    ram_kb: np.ndarray,
    cpu_per_event: np.ndarray,
    io_kb_per_s: np.ndarray,
    max_cpu_s: np.ndarray,
    max_input_bytes: np.ndarray,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
    ramunit: np.ndarray | None = None,
    cputimeunit: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Apply margins, rounding and units to per-task aggregates of the scout jobs.

    Follows ``getScoutJobData_JEDI`` (panda-server,
    ``pandaserver/taskbuffer/db_proxy_mods/task_utils_module.py``) for the rounding
    and the units.

    Parameters
    ----------
    ram_kb:
        The ``ram_quantile`` of the per-job memory in kB: ``ceil((maxpss -
        baseramcount) / cores)`` for a task in MBPerCore, the raw ``maxpss``
        otherwise (NaN for MBPerCoreFixed, which PanDA never measures).
    cpu_per_event:
        The ``cpu_quantile`` of per-job HS06 seconds per event.
    io_kb_per_s:
        The max per-job I/O rate in kB/s per core.
    max_cpu_s, max_input_bytes:
        The max CPU consumption time (s) and the max input size (bytes).
    params:
        Constants of the formulas.
    ramunit:
        Each task's RAMUNIT (None: all MBPerCore). Not MBPerCore: PanDA writes the
        value in ``MB`` (a whole job's memory), and the normalised ``ramcount``, the
        model's MBPerCore target, is NaN.
    cputimeunit:
        Each task's CPUTIMEUNIT (None: all given). A task without one keeps it NULL
        unless the value is written in mHS06sPerEvent, as PanDA leaves it.

    Returns a mapping of column name to array: the normalised labels (``ramcount``,
    ...) as floats and PanDA's ``<name>_value`` (float holding an integer, NaN when
    unknown) and ``<name>_unit`` (object, None when unknown).
    """
    max_cpu_s = np.asarray(max_cpu_s, float)
    max_input_bytes = np.asarray(max_input_bytes, float)
    out: dict[str, np.ndarray] = {}

    n = len(max_cpu_s)
    ramunit = np.full(n, RAM_PER_CORE_UNIT, object) if ramunit is None else ramunit
    per_core = np.asarray(ramunit, dtype=object) == RAM_PER_CORE_UNIT
    # PanDA: memVal * (100 + margin) // 100, / 1024, int(): rounds down (to zero).
    percent = round(params.ram_margin * 100)
    ram = np.trunc(np.floor_divide(np.asarray(ram_kb, float) * percent, 100) / 1024.0)
    ram = np.where(ram < 0, 1.0, ram)
    ram = np.where(params.min_ramcount > ram, float(params.min_ramcount), ram)
    out["ramcount_value"] = ram
    out["ramcount"] = np.where(per_core, ram, np.nan)

    cpu = np.asarray(cpu_per_event, float) * params.cpu_margin
    cpu_value, milli = cputime_to_panda(cpu, params.milli_threshold)
    out["cputime"] = np.where(milli, cpu_value / 1000.0, cpu_value)
    out["cputime_value"] = cpu_value

    io = np.ceil(np.asarray(io_kb_per_s, float))
    out["iointensity"], out["iointensity_value"] = io, io

    with np.errstate(divide="ignore", invalid="ignore"):
        per_mb = max_cpu_s / (max_input_bytes / params.bytes_per_mb)
    wall = np.where(
        max_input_bytes > 0, np.ceil(per_mb * params.walltime_margin), np.nan
    )
    wall = np.where(max_cpu_s < params.walltime_min_cpu_s, 0.0, wall)
    out["walltime"], out["walltime_value"] = wall, wall

    for name in TARGET_NAMES:
        known = ~np.isnan(out[f"{name}_value"])
        units = np.full(len(known), None, dtype=object)
        units[known] = LABEL_UNITS[name]
        out[f"{name}_unit"] = units
    out["ramcount_unit"][~per_core & ~np.isnan(ram)] = RAM_TOTAL_UNIT
    if cputimeunit is not None:
        # PanDA writes HS06sPerEvent only over a unit the task had (or mHS06s...).
        given = pd.notna(np.asarray(cputimeunit, dtype=object))
        out["cputime_unit"][~given] = None
    out["cputime_unit"][milli & ~np.isnan(cpu)] = MILLI_CPUTIME_UNIT
    return out


def group_quantile(
    codes: np.ndarray, values: np.ndarray, n_groups: int, q: float
) -> np.ndarray:
    """Return the ``q`` quantile of ``values`` per group, interpolated linearly.

    Matches ``numpy.quantile(..., method="linear")`` (and SQL ``percentile_cont``)
    group by group without a Python loop: one sort by (group, value), then index
    arithmetic. NaN values are ignored; a group without values gets NaN.

    Parameters
    ----------
    codes:
        Group index ``0 <= code < n_groups`` of each value.
    values:
        The values.
    n_groups:
        Number of groups (length of the result).
    q:
        Quantile in [0, 1].
    """
    codes = np.asarray(codes, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    codes, values = codes[keep], values[keep]
    # Sort by (group, value) with one int64 key: 3x faster than np.lexsort.
    by_value = np.argsort(values)
    rank = np.empty(len(values), dtype=np.int64)
    rank[by_value] = np.arange(len(values))
    values = values[np.argsort(codes * max(len(values), 1) + rank)]
    counts = np.bincount(codes, minlength=n_groups)
    starts = np.cumsum(counts) - counts
    result = np.full(n_groups, np.nan)
    has = counts > 0
    virtual = (counts[has] - 1) * q
    below = np.floor(virtual).astype(np.int64)
    above = np.minimum(below + 1, counts[has] - 1)
    frac = virtual - below
    a = values[starts[has] + below]
    b = values[starts[has] + above]
    # numpy's lerp: from the nearer end, so results equal numpy.quantile bit for bit.
    diff = b - a
    result[has] = np.where(frac >= 0.5, b - diff * (1 - frac), a + diff * frac)
    return result


def _group_max(codes: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Return the max of ``values`` per group ignoring NaN (NaN for empty groups)."""
    result = np.full(n_groups, -np.inf)
    keep = ~np.isnan(values)
    np.maximum.at(result, codes[keep], values[keep])
    result[np.isinf(result) & (result < 0)] = np.nan
    return result


def _numeric(frame: pd.DataFrame, column: str) -> np.ndarray:
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(
        dtype=float, na_value=np.nan
    )


def _require(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(
            f"The {what} frame must have the columns {list(columns)}. "
            f"Got {sorted(map(str, frame.columns))} instead; missing {missing}."
        )


def _required(columns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(c for c in columns if c not in OPTIONAL_COLUMNS)


def _with_optional(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """Return ``frame`` with the absent optional ones of ``columns`` filled in."""
    absent = {
        name: value
        for name, value in OPTIONAL_COLUMNS.items()
        if name in columns and name not in frame.columns
    }
    return frame.assign(**absent) if absent else frame


def labels_frame(
    jobs: pd.DataFrame, tasks: pd.DataFrame, params: LabelParams = DEFAULT_LABEL_PARAMS
) -> pd.DataFrame:
    """Compute the labels of many tasks at once, one row per task of ``tasks``.

    Vectorised over whole columns (no loop per task), so a million tasks take
    seconds. Jobs of tasks missing from ``tasks`` are ignored.

    Parameters
    ----------
    jobs:
        JOBSARCHIVED4 rows with lower-case columns (:data:`JOB_COLUMNS`).
    tasks:
        JEDI_TASKS rows with lower-case columns (:data:`TASK_COLUMNS`).
    params:
        Constants of the formulas.

    Returns a frame with :data:`LABEL_COLUMNS`: normalised float labels, PanDA's
    ``<name>_value`` (nullable Int64) and ``<name>_unit``, ``n_scouts`` and
    ``labels_known_at`` (max ENDTIME of the task's scouts: when PanDA knew them).
    """
    _require(jobs, _required(JOB_COLUMNS), "jobs")
    _require(tasks, _required(TASK_COLUMNS), "tasks")
    jobs = _with_optional(jobs, (*JOB_COLUMNS, *INPUT_COLUMNS))
    tasks = _with_optional(tasks, TASK_COLUMNS)
    tasks = tasks.drop_duplicates("jeditaskid")
    task_ids = pd.Index(tasks["jeditaskid"].to_numpy(dtype=np.int64))
    n_tasks = len(task_ids)

    handling = (
        "," + jobs["specialhandling"].fillna("").astype(str).str.replace(" ", "") + ","
    )
    flagged = handling.str.contains(f",{params.scout_flag},", regex=False)
    codes = task_ids.get_indexer(pd.to_numeric(jobs["jeditaskid"]).to_numpy(np.int64))
    scout = (flagged & (jobs["jobstatus"] == params.finished_status)).to_numpy(bool)
    scout = scout & (codes >= 0)
    jobs = jobs.loc[scout]
    codes = codes[scout]

    def per_job(values: np.ndarray) -> np.ndarray:
        return values[codes]

    # JobUtils.getCoreCount: ACTUALCORECOUNT, then the job's CORECOUNT, then 1.
    actual, cores = _numeric(jobs, "actualcorecount"), _numeric(jobs, "corecount")
    cores = np.where(actual > 0, actual, np.where(cores > 0, cores, 1.0))
    ramunit = tasks["ramunit"].to_numpy(dtype=object)
    base_ram_kb = np.nan_to_num(per_job(_numeric(tasks, "baseramcount"))) * 1024.0
    efficiency = per_job(_numeric(tasks, "cpuefficiency"))
    efficiency = np.where(
        np.isnan(efficiency), params.default_cpu_efficiency, efficiency
    )
    base_wall = per_job(_numeric(tasks, "basewalltime"))
    base_wall = np.where(np.isnan(base_wall), params.default_base_walltime, base_wall)

    start = pd.to_datetime(jobs["starttime"])
    end = pd.to_datetime(jobs["endtime"])
    exec_s = (end - start).dt.total_seconds().to_numpy(dtype=float, na_value=np.nan)
    ran = exec_s > 0

    pss = _numeric(jobs, "maxpss")
    job_unit = ramunit[codes]
    ram_kb = np.where(
        job_unit == RAM_PER_CORE_UNIT, np.ceil((pss - base_ram_kb) / cores), pss
    )
    ram_kb = np.where((pss > 0) & (job_unit != RAM_FIXED_UNIT), ram_kb, np.nan)

    # The master input's files where JEDI_DATASET_CONTENTS has them, else the job's.
    input_mb, master_events, pseudo = (_numeric(jobs, c) for c in INPUT_COLUMNS)
    in_bytes = np.where(
        np.isnan(input_mb),
        _numeric(jobs, "inputfilebytes"),
        input_mb * BYTES_PER_INPUT_MB,
    )
    events = np.where(np.isnan(master_events), _numeric(jobs, "nevents"), master_events)
    total_bytes = np.nan_to_num(in_bytes) + np.nan_to_num(
        _numeric(jobs, "outputfilebytes")
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        io = np.where(ran, total_bytes / 1024.0 / exec_s / cores, np.nan)
        hs06sec = _numeric(jobs, "hs06sec")
        power = np.where(
            hs06sec > 0, hs06sec / (exec_s * cores), params.default_core_power
        )
        usable = (
            ran
            & (events > 0)
            & (
                (pseudo > 0)
                | (events >= params.cpu_min_events_per_core * cores)
                | (exec_s > params.cpu_long_job_s)
            )
        )
        busy = np.maximum(exec_s - base_wall, 0.0)
        cpu = np.where(
            usable, busy * power * cores * efficiency / 100.0 / events, np.nan
        )

    final = finalize_labels(
        ram_kb=group_quantile(codes, ram_kb, n_tasks, params.ram_quantile),
        cpu_per_event=group_quantile(codes, cpu, n_tasks, params.cpu_quantile),
        io_kb_per_s=_group_max(codes, io, n_tasks),
        max_cpu_s=_group_max(codes, _numeric(jobs, "cpuconsumptiontime"), n_tasks),
        max_input_bytes=_group_max(codes, in_bytes, n_tasks),
        params=params,
        ramunit=ramunit,
        cputimeunit=tasks["cputimeunit"].to_numpy(dtype=object),
    )
    known_at = pd.Series(end.to_numpy()).groupby(codes).max()
    return assemble_frame(
        task_ids.to_numpy(),
        final,
        np.bincount(codes, minlength=n_tasks),
        known_at.reindex(range(n_tasks)).to_numpy(),
    )


def join_labels(
    tasks: pd.DataFrame,
    jobs: pd.DataFrame,
    keep: Sequence[str],
    params: LabelParams = DEFAULT_LABEL_PARAMS,
) -> pd.DataFrame:
    """Return the ``keep`` columns of ``tasks`` with their four labels and when known.

    The labelled history both training and serving read: one row per task, the
    normalised labels (NaN where the scouts could not measure one) and
    ``labels_known_at``.
    """
    labels = labels_frame(jobs, tasks, params)
    columns = [c for c in dict.fromkeys(keep) if c in tasks.columns]
    return tasks[columns].merge(
        labels[["jeditaskid", *TARGET_NAMES, "labels_known_at"]],
        on="jeditaskid",
        how="left",
    )


def assemble_frame(
    task_ids: np.ndarray,
    final: Mapping[str, np.ndarray],
    n_scouts: np.ndarray,
    labels_known_at: np.ndarray,
) -> pd.DataFrame:
    """Build the labels frame (:data:`LABEL_COLUMNS`) from finalised label arrays.

    Parameters
    ----------
    task_ids:
        JEDITASKID of each row.
    final:
        The arrays :func:`finalize_labels` returned.
    n_scouts:
        Number of finished scout jobs per task.
    labels_known_at:
        When the labels became known (max scout ENDTIME), NaT when unknown.
    """
    columns: dict[str, Any] = {"jeditaskid": np.asarray(task_ids, dtype=np.int64)}
    for name in TARGET_NAMES:
        columns[name] = np.asarray(final[name], dtype=float)
    for name in TARGET_NAMES:
        columns[f"{name}_value"] = pd.array(
            pd.Series(final[f"{name}_value"], dtype=float).round(), dtype="Int64"
        )
        columns[f"{name}_unit"] = pd.Series(final[f"{name}_unit"], dtype=object)
    columns["n_scouts"] = np.asarray(n_scouts, dtype=np.int64)
    columns["labels_known_at"] = pd.to_datetime(pd.Series(labels_known_at))
    frame = pd.DataFrame(columns)
    return frame[list(LABEL_COLUMNS)]


#: Columns of per-task scout aggregates (SQL and Spark engines), in order.
AGGREGATE_COLUMNS = (
    "jeditaskid",
    "ram_kb",
    "cpu_per_event",
    "io_kb_per_s",
    "max_cpu_s",
    "max_input_bytes",
    "n_scouts",
    "labels_known_at",
    "ramunit",
    "cputimeunit",
)


def labels_from_aggregates(
    aggregates: pd.DataFrame, params: LabelParams = DEFAULT_LABEL_PARAMS
) -> pd.DataFrame:
    """Turn per-task scout aggregates into the labels frame (:data:`LABEL_COLUMNS`).

    The engines that aggregate elsewhere (SQL in the database, Spark on a cluster)
    return one row per task with :data:`AGGREGATE_COLUMNS`; this applies the same
    :func:`finalize_labels` as :func:`labels_frame`, so every engine rounds alike.
    Rows come out in JEDITASKID order.
    """
    aggregates = aggregates.sort_values("jeditaskid", kind="stable")

    def column(name: str) -> np.ndarray:
        return pd.to_numeric(aggregates[name]).to_numpy(dtype=float, na_value=np.nan)

    final = finalize_labels(
        ram_kb=column("ram_kb"),
        cpu_per_event=column("cpu_per_event"),
        io_kb_per_s=column("io_kb_per_s"),
        max_cpu_s=column("max_cpu_s"),
        max_input_bytes=column("max_input_bytes"),
        params=params,
        ramunit=aggregates["ramunit"].to_numpy(dtype=object),
        cputimeunit=aggregates["cputimeunit"].to_numpy(dtype=object),
    )
    return assemble_frame(
        aggregates["jeditaskid"].to_numpy(dtype=np.int64),
        final,
        aggregates["n_scouts"].to_numpy(dtype=np.int64),
        # Microseconds: the precision of PanDA's and Parquet's timestamps.
        pd.to_datetime(aggregates["labels_known_at"])
        .astype("datetime64[us]")
        .to_numpy(),
    )
