"""Turn a task's finished scout jobs into the four labels PanDA itself would compute.

The formulas (ramcount in MBPerCore, cputime in HS06sPerEvent, walltime in
kSI2kseconds, iointensity in kBPerS) are JEDI's scout measurement; ``docs/labels.md``
states them with a worked example,
:class:`~panda_predictor.core.label_values.LabelParams` holds their constants.

:func:`labels_frame` computes them for millions of tasks (numpy over whole columns,
no loop per task) and finishes with
:func:`~panda_predictor.core.label_values.finalize_labels`, which
:mod:`panda_predictor.db.labels_sql` also uses on its SQL aggregates, so the rounding
is the same everywhere. A plain-Python reference for one task, which the tests hold
:func:`labels_frame` to, lives in ``tests/labels_reference.py``.

Missing labels: a task without finished scout jobs gets ``NaN`` for every normalised
label, ``None``/``<NA>`` for every PanDA value and unit, ``n_scouts == 0`` and no
``labels_known_at``. A task with scouts can still lack one label (e.g. no scout passes
the nEvents filter -> no ``cputime``); that label alone is NaN/None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.label_values import (
    DEFAULT_LABEL_PARAMS,
    RAM_FIXED_UNIT,
    RAM_PER_CORE_UNIT,
    LabelParams,
    assemble_frame,
    finalize_labels,
)

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

    jobs, codes = _scout_jobs(jobs, task_ids, params)
    ramunit = tasks["ramunit"].to_numpy(dtype=object)
    job = _job_measures(jobs, tasks, codes, ramunit, params)
    final = finalize_labels(
        ram_kb=group_quantile(codes, job["ram_kb"], n_tasks, params.ram_quantile),
        cpu_per_event=group_quantile(codes, job["cpu"], n_tasks, params.cpu_quantile),
        io_kb_per_s=_group_max(codes, job["io"], n_tasks),
        max_cpu_s=_group_max(codes, _numeric(jobs, "cpuconsumptiontime"), n_tasks),
        max_input_bytes=_group_max(codes, job["in_bytes"], n_tasks),
        params=params,
        ramunit=ramunit,
        cputimeunit=tasks["cputimeunit"].to_numpy(dtype=object),
    )
    known_at = pd.Series(job["end"].to_numpy()).groupby(codes).max()
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


def _scout_jobs(
    jobs: pd.DataFrame, task_ids: pd.Index, params: LabelParams
) -> tuple[pd.DataFrame, np.ndarray]:
    """Return the finished scout jobs of the known tasks, and each one's task code.

    A scout job carries the scout flag in its comma-separated SPECIALHANDLING.
    """
    handling = (
        "," + jobs["specialhandling"].fillna("").astype(str).str.replace(" ", "") + ","
    )
    flagged = handling.str.contains(f",{params.scout_flag},", regex=False)
    codes = task_ids.get_indexer(pd.to_numeric(jobs["jeditaskid"]).to_numpy(np.int64))
    scout = (flagged & (jobs["jobstatus"] == params.finished_status)).to_numpy(bool)
    scout = scout & (codes >= 0)
    return jobs.loc[scout], codes[scout]


def _job_measures(
    jobs: pd.DataFrame,
    tasks: pd.DataFrame,
    codes: np.ndarray,
    ramunit: np.ndarray,
    params: LabelParams,
) -> dict[str, Any]:
    """Return what each scout job measured, by JEDI's per-job formulas.

    ``ram_kb`` (NaN where PanDA does not measure it), ``cpu`` (HS06 seconds per
    event, NaN where the job does not count for cputime), ``io`` (kB/s per core),
    ``in_bytes`` (the input size) and ``end`` (when the job ended).
    """

    def per_job(values: np.ndarray) -> np.ndarray:
        return values[codes]

    # JobUtils.getCoreCount: ACTUALCORECOUNT, then the job's CORECOUNT, then 1.
    actual, cores = _numeric(jobs, "actualcorecount"), _numeric(jobs, "corecount")
    cores = np.where(actual > 0, actual, np.where(cores > 0, cores, 1.0))
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

    return {"ram_kb": ram_kb, "cpu": cpu, "io": io, "in_bytes": in_bytes, "end": end}
