"""A plain-Python reference of the scout labels for one task, for the tests only.

Production computes labels over whole frames (``labels_frame`` in
:mod:`panda_predictor.core.labels`: numpy, no loop per task) and in SQL; neither reads
formula by formula. This loop over one task's job records states each formula as
``docs/labels.md`` does, so the hand-computed tests check it and
``test_vectorised_equals_per_task`` holds ``labels_frame`` to it task by task. It ends
with the production ``finalize_labels``, so the rounding is shared, not copied.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.label_values import (
    DEFAULT_LABEL_PARAMS,
    RAM_FIXED_UNIT,
    RAM_PER_CORE_UNIT,
    LabelParams,
    finalize_labels,
)
from panda_predictor.core.labels import BYTES_PER_INPUT_MB, OPTIONAL_COLUMNS


@dataclass(frozen=True)
class TaskLabels:
    """The labels of one task: normalised floats and PanDA's (int value, unit) pairs."""

    ramcount: float
    cputime: float
    iointensity: float
    walltime: float
    panda: dict[str, tuple[int, str | None] | None] = field(default_factory=dict)
    n_scouts: int = 0
    labels_known_at: datetime | None = None


def _num(value: Any, default: float = math.nan) -> float:
    """Return ``value`` as a float, ``default`` for None/NaN/NA."""
    if value is None or pd.isna(value):
        return default
    return float(value)


def _time(value: Any) -> datetime | None:
    """Return ``value`` as a datetime, None for None/NaT."""
    if value is None or pd.isna(value):
        return None
    return pd.Timestamp(value).to_pydatetime()


def _is_scout(record: Mapping[str, Any], params: LabelParams) -> bool:
    handling = record.get("specialhandling") or ""
    tokens = str(handling).replace(" ", "").split(",")
    return (
        record.get("jobstatus") == params.finished_status
        and params.scout_flag in tokens
    )


def _cores(job: Mapping[str, Any]) -> float:
    """Return the job's cores as ``JobUtils.getCoreCount``: actual, defined, 1."""
    for candidate in (_num(job.get("actualcorecount")), _num(job.get("corecount"))):
        if candidate > 0:
            return candidate
    return 1.0


def _ram_kb(pss: float, base_ram_kb: float, cores: float, unit: Any) -> float:
    """Return one job's memory as getScoutJobData_JEDI collects it (NaN: skipped)."""
    if not pss > 0 or unit == RAM_FIXED_UNIT:
        return math.nan
    if unit == RAM_PER_CORE_UNIT:
        return float(math.ceil((pss - base_ram_kb) / cores))
    return pss


def task_labels(
    jobs: Iterable[Mapping[str, Any]],
    task: Mapping[str, Any],
    params: LabelParams = DEFAULT_LABEL_PARAMS,
) -> TaskLabels:
    """Compute one task's labels from its job records, as JEDI does after scouting.

    Parameters
    ----------
    jobs:
        The task's JOBSARCHIVED4 rows as mappings with lower-case column names
        (``JOB_COLUMNS`` of :mod:`panda_predictor.core.labels`); non-scout and
        unfinished jobs are ignored.
    task:
        The task's JEDI_TASKS row (``TASK_COLUMNS`` of the same module).
    params:
        Constants of the formulas.
    """
    ramunit = task.get("ramunit", OPTIONAL_COLUMNS["ramunit"])
    cputimeunit = task.get("cputimeunit", OPTIONAL_COLUMNS["cputimeunit"])
    base_ram_kb = _num(task.get("baseramcount"), 0.0) * 1024.0
    efficiency = _num(task.get("cpuefficiency"), params.default_cpu_efficiency)
    base_wall = _num(task.get("basewalltime"), params.default_base_walltime)

    ram_kb: list[float] = []
    cpu: list[float] = []
    io: list[float] = []
    cpu_times: list[float] = []
    inputs: list[float] = []
    ends: list[datetime] = []
    n_scouts = 0
    for job in jobs:
        if not _is_scout(job, params):
            continue
        n_scouts += 1
        cores = _cores(job)
        start, end = _time(job.get("starttime")), _time(job.get("endtime"))
        if end is not None:
            ends.append(end)
        exec_s = (end - start).total_seconds() if start and end else math.nan
        memory = _ram_kb(_num(job.get("maxpss")), base_ram_kb, cores, ramunit)
        if not math.isnan(memory):
            ram_kb.append(memory)
        cpu_times.append(_num(job.get("cpuconsumptiontime")))
        # The master input's files (JEDI_DATASET_CONTENTS) where known, else the job's.
        input_mb = _num(job.get("master_input_mb"))
        in_bytes = (
            _num(job.get("inputfilebytes"))
            if math.isnan(input_mb)
            else input_mb * BYTES_PER_INPUT_MB
        )
        master_events = _num(job.get("master_nevents"))
        pseudo = _num(job.get("pseudo_input"), 0.0) > 0
        inputs.append(in_bytes)
        if exec_s > 0:
            out_bytes = _num(job.get("outputfilebytes"))
            total = np.nansum([in_bytes, out_bytes])
            io.append(total / 1024.0 / exec_s / cores)
            hs06sec = _num(job.get("hs06sec"))
            power = (
                hs06sec / (exec_s * cores) if hs06sec > 0 else params.default_core_power
            )
            events = (
                _num(job.get("nevents")) if math.isnan(master_events) else master_events
            )
            enough = pseudo or events >= params.cpu_min_events_per_core * cores
            if events > 0 and (enough or exec_s > params.cpu_long_job_s):
                busy = max(exec_s - base_wall, 0.0)
                cpu.append(busy * power * cores * efficiency / 100.0 / events)

    def quantile(values: list[float], q: float) -> float:
        return float(np.quantile(values, q, method="linear")) if values else math.nan

    def nanmax(values: list[float]) -> float:
        finite = [v for v in values if not math.isnan(v)]
        return max(finite) if finite else math.nan

    final = finalize_labels(
        ram_kb=np.array([quantile(ram_kb, params.ram_quantile)]),
        cpu_per_event=np.array([quantile(cpu, params.cpu_quantile)]),
        io_kb_per_s=np.array([nanmax(io)]),
        max_cpu_s=np.array([nanmax(cpu_times)]),
        max_input_bytes=np.array([nanmax(inputs)]),
        params=params,
        ramunit=np.array([ramunit], dtype=object),
        cputimeunit=np.array([cputimeunit], dtype=object),
    )
    panda: dict[str, tuple[int, str | None] | None] = {}
    for name in TARGET_NAMES:
        value, unit = final[f"{name}_value"][0], final[f"{name}_unit"][0]
        panda[name] = None if pd.isna(value) else (int(value), unit)
    return TaskLabels(
        ramcount=float(final["ramcount"][0]),
        cputime=float(final["cputime"][0]),
        iointensity=float(final["iointensity"][0]),
        walltime=float(final["walltime"][0]),
        panda=panda,
        n_scouts=n_scouts,
        labels_known_at=max(ends) if ends else None,
    )
