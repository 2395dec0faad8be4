"""Fill the resource columns JEDI would have written into historical JEDI_TASKS rows.

A simplified copy of JEDI's scout step (see /work/shared/PANDA.md) applied to the
simulated finished scouts, so the history looks like PanDA's (a task that ran scouts
carries their result). It is NOT the label code of the project; labels are computed
from the job records by the core.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from panda_predictor.core.domain.units import (
    CPUTIME_UNIT,
    MILLI_CPUTIME_UNIT,
    cputime_to_panda,
)
from pipelines.simulation.catalog import NULL

_BASE_WALLTIME = 600
_CPU_EFFICIENCY = 0.9


def fill_requirements(tasks: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """Return ``tasks`` with ramcount, cputime, iointensity, walltime and units."""
    scouts = jobs[(jobs["specialhandling"] == "sj") & (jobs["jobstatus"] == "finished")]
    base = tasks.set_index("jeditaskid")["baseramcount"]
    cc = scouts["corecount"].to_numpy(dtype=float)
    wall = (scouts["endtime"] - scouts["starttime"]).dt.total_seconds().to_numpy()
    wall = np.maximum(wall, 1.0)
    power = scouts["hs06sec"].to_numpy() / (wall * cc)
    nev = scouts["nevents"].to_numpy(dtype=float)
    per_job = pd.DataFrame(
        {
            "jeditaskid": scouts["jeditaskid"].to_numpy(),
            "ram_kb": (
                scouts["maxpss"].to_numpy()
                - base.reindex(scouts["jeditaskid"]).to_numpy() * 1024
            )
            / cc,
            "cpu": np.where(
                (nev >= 10 * cc) | (wall > 6 * 3600),
                (wall - _BASE_WALLTIME)
                * power
                * cc
                * _CPU_EFFICIENCY
                / np.maximum(nev, 1),
                np.nan,
            ),
            "io": (
                scouts["inputfilebytes"].to_numpy()
                + scouts["outputfilebytes"].to_numpy()
            )
            / 1024
            / wall
            / cc,
            "cpu_s": scouts["cpuconsumptiontime"].to_numpy(dtype=float),
        }
    )
    grouped = per_job.groupby("jeditaskid")
    ram = np.ceil(grouped["ram_kb"].quantile(0.75) * 1.10 / 1024).clip(lower=1)
    cpu = (grouped["cpu"].quantile(0.95) * 1.5).clip(lower=0)
    io = np.ceil(grouped["io"].max())
    max_cpu = grouped["cpu_s"].max()
    largest_mb = (
        scouts.groupby("jeditaskid")["inputfilebytes"].max().reindex(max_cpu.index)
        / 1024**2
    )
    walltime = np.where(
        max_cpu < 3600, 0, np.ceil(max_cpu / np.maximum(largest_mb, 1.0) * 1.5)
    )

    out = tasks.copy()
    ids = out["jeditaskid"]
    # PanDA's stored form (x1000 in mHS06sPerEvent below 10): the core's conversion.
    cpu_value, milli = cputime_to_panda(cpu.to_numpy())
    values = {
        "ramcount": (ram, "ramunit", "MBPerCore"),
        "iointensity": (io, "iointensityunit", "kBPerS"),
        "walltime": (
            pd.Series(walltime, index=max_cpu.index),
            "walltimeunit",
            "kSI2kseconds",
        ),
    }
    for column, (series, unit_col, unit) in values.items():
        mapped = ids.map(series)
        out[column] = pd.array(mapped.round(), dtype="Int64")
        out[unit_col] = np.where(mapped.notna(), unit, NULL)
    cpu_series = pd.Series(cpu_value, index=cpu.index)
    mapped = ids.map(cpu_series)
    out["cputime"] = pd.array(mapped.round(), dtype="Int64")
    unit = ids.map(
        pd.Series(np.where(milli, MILLI_CPUTIME_UNIT, CPUTIME_UNIT), cpu.index)
    )
    out["cputimeunit"] = np.where(mapped.notna(), unit, NULL)
    return out
