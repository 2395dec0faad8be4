"""Build a batch's JEDI_DATASETS rows: inputs, pile-up secondaries, outputs, log."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipelines.simulation.catalog import Catalog
from pipelines.simulation.tasks import TaskDraw, _s

#: Files a ready task's master dataset may use while scouts are to run: JEDI's
#: insertFilesForDataset caps nFilesToBeUsed at the scout chunks (10 scout jobs of
#: one file here), which the write-back must lift.
SCOUT_CAP_FILES = 10

_PILEUP = (
    "mc23_13p6TeV.900311.Epos_minbias_inelastic_lowjetphoton.simul.HITS.e8341_s4162_tid"
)


def dataset_frame(
    rng: np.random.Generator,
    cat: Catalog,
    draw: TaskDraw,
    names: dict,
    first_dataset_id: int,
    new: bool,
) -> pd.DataFrame:
    """Return one row per dataset of each task, with ids from ``first_dataset_id``.

    History datasets are 'done'; a newly defined task's datasets are 'defined' with
    NFILES/NEVENTS 0 (refine time) or 'ready' with its inputs counted and the master's
    NFILESTOBEUSED capped at the scout chunks, as JEDI leaves it.
    """
    n = len(draw.task_id)
    task = np.arange(n)
    n_secondary = cat.ptype_values["secondary_inputs"][draw.ptype].astype(np.int64)
    n_output = 1 + (rng.random(n) < 0.3)
    n_jobs = draw.n_scouts + draw.n_regular

    # (task, slot, kind) per dataset; kind 0 primary, 1 secondary, 2 output, 3 log.
    sec_task = np.repeat(task, n_secondary)
    out_task = np.repeat(task, n_output)
    rows_task = np.concatenate([task, sec_task, out_task, task])
    kind = np.concatenate(
        [np.zeros(n), np.ones(len(sec_task)), np.full(len(out_task), 2), np.full(n, 3)]
    ).astype(np.int64)
    order = np.lexsort((kind, rows_task))
    rows_task, kind = rows_task[order], kind[order]
    m = len(rows_task)
    dataset_id = first_dataset_id + np.arange(m, dtype=np.int64)
    primary_id = dataset_id[kind == 0]  # one per task, in task order
    t = rows_task

    # The order of the draws below is the generator's: changing it changes the
    # simulated history of every seed.
    name, dtype = _names(rng, cat, draw, names, t, kind)
    status, nfiles, nevents, to_use, used = _file_counts(
        rng, draw, t, kind, n_jobs, new
    )
    created = draw.created[t].astype("datetime64[us]")
    masterid = np.where(kind == 1, primary_id[t], pd.NA)
    return pd.DataFrame(
        {
            "jeditaskid": draw.task_id[t],
            "datasetid": dataset_id,
            "datasetname": name,
            "type": dtype,
            "masterid": pd.array(masterid, dtype="Int64"),
            "status": status,
            "nfiles": nfiles.astype(np.int64),
            "nevents": nevents.astype(np.int64),
            "nfilestobeused": to_use.astype(np.int64),
            "nfilesused": used.astype(np.int64),
            "creationtime": created,
            "modificationtime": created,
        }
    )


def _names(
    rng: np.random.Generator,
    cat: Catalog,
    draw: TaskDraw,
    names: dict,
    t: np.ndarray,
    kind: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Return each dataset's name and type (kind 0 primary, 1 pile-up, 2 out, 3 log)."""
    m = len(t)
    fmt_in = cat.ptype_strings["input_format"][draw.ptype[t]]
    fmt_out = cat.ptype_strings["output_format"][draw.ptype[t]]
    stem, tid = names["stem"][t], names["tid"][t]
    parent = _s(draw.task_id[t] - rng.integers(1000, 500_000, m))
    name = np.select(
        [kind == 0, kind == 1, kind == 2],
        [
            stem + "." + fmt_in + ".e8514_tid" + parent + "_00",
            _PILEUP + parent + "_00",
            stem
            + "."
            + fmt_out
            + ".tid"
            + tid
            + "_0"
            + _s(kind + rng.integers(0, 2, m)),
        ],
        stem + ".log.tid" + tid + "_00",
    )
    dtype = np.select(
        [kind == 0, kind == 1, kind == 2],
        [cat.ptype_strings["input_type"][draw.ptype[t]], "input", "output"],
        "log",
    ).astype(object)
    return name, dtype


def _file_counts(
    rng: np.random.Generator,
    draw: TaskDraw,
    t: np.ndarray,
    kind: np.ndarray,
    n_jobs: np.ndarray,
    new: bool,
) -> tuple[np.ndarray, ...]:
    """Return each dataset's status, NFILES, NEVENTS, NFILESTOBEUSED and NFILESUSED."""
    m = len(t)
    sec_files = np.maximum(1, np.rint(40 * np.exp(rng.normal(0, 0.5, m)))).astype(
        np.int64
    )
    nfiles = np.select(
        [kind == 0, kind == 1, kind == 2],
        [draw.input_files[t], sec_files, n_jobs[t]],
        n_jobs[t],
    )
    nevents = np.select(
        [kind == 0, kind == 1, kind == 2],
        [draw.input_events[t], sec_files * 2000, n_jobs[t] * draw.events_per_job[t]],
        0,
    )
    if new:
        ready = draw.status[t] == "ready"
        counted = ready & (kind <= 1)
        nfiles = np.where(counted, nfiles, 0)
        nevents = np.where(counted, nevents, 0)
        status = np.where(ready, "ready", "defined").astype(object)
        capped = ready & (kind == 0)
        to_use = np.where(capped, np.minimum(nfiles, SCOUT_CAP_FILES), nfiles)
        used = np.zeros(m, dtype=np.int64)
    else:
        status = np.full(m, "done", dtype=object)
        to_use = used = nfiles
    return status, nfiles, nevents, to_use, used
