"""The labels' values as PanDA writes them: margins, rounding and units.

Every engine that computes labels (numpy over job rows in
:mod:`panda_predictor.core.labels`, SQL in the database, Spark on a cluster) ends in
:func:`finalize_labels` on its per-task aggregates of the scout jobs, so the
rounding is the same everywhere; :class:`LabelParams` holds the formulas' constants
(``docs/labels.md`` states them with a worked example).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.domain.targets import TARGET_NAMES, TARGETS
from panda_predictor.core.domain.units import MILLI_CPUTIME_UNIT, cputime_to_panda

#: Unit written with each label (cputime switches to MILLI_CPUTIME_UNIT below 10).
LABEL_UNITS = {name: target.unit for name, target in TARGETS.items()}
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

    out.update(_units(out, per_core, milli & ~np.isnan(cpu), cputimeunit))
    return out


def _units(
    values: Mapping[str, np.ndarray],
    per_core: np.ndarray,
    milli: np.ndarray,
    cputimeunit: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """Return each label's ``<name>_unit`` column as PanDA writes it.

    A known value gets its target's unit; a ramCount not per core is in ``MB``; a
    cputime written x1000 (``milli``) is in mHS06sPerEvent, and otherwise PanDA
    writes HS06sPerEvent only over a unit the task had (``cputimeunit``).
    """
    out = {}
    for name in TARGET_NAMES:
        known = ~np.isnan(values[f"{name}_value"])
        units = np.full(len(known), None, dtype=object)
        units[known] = LABEL_UNITS[name]
        out[f"{name}_unit"] = units
    out["ramcount_unit"][~per_core & ~np.isnan(values["ramcount_value"])] = (
        RAM_TOTAL_UNIT
    )
    if cputimeunit is not None:
        given = pd.notna(np.asarray(cputimeunit, dtype=object))
        out["cputime_unit"][~given] = None
    out["cputime_unit"][milli] = MILLI_CPUTIME_UNIT
    return out


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
