"""Map a job log onto the task and history schema the hook reads.

A job log (SWF or HTCondor history, read by :mod:`panda_predictor.ingest`) has one
row per job. Here each job becomes one task in the production schema: the columns of
JEDI_TASKS the features read
(:data:`~panda_predictor.core.features.pipeline.TASK_COLUMNS`), the requester's values
(:data:`~panda_predictor.core.features.task_features.REQUEST_COLUMNS`), the labels under
our target names and ``labels_known_at``, the moment the job finished (its labels could
not be known before). So the production feature pipeline, training, predictor and policy
run on a real log unchanged.

How the fields map (a log field that a file does not record stays NULL):

=================  ===========================  ==================================
task column        job-log field                why
=================  ===========================  ==================================
``username``       user                         the user, as in PanDA
``transpath``      executable (application)     the transformation a task runs
``processingtype`` queue                        the kind of work the site expects
``workinggroup``   group                        the user's group
``campaign``       partition                    where (which machine part) it ran
``corecount``      requested processors         cores asked for
``requested_*``    requested time / memory      the requester's own values
labels             run time, CPU time, memory,  ``walltime``, ``cputime``,
                   I/O rate                     ``ramcount``, ``iointensity``
                                                (trace units)
``taskname``       instance (Nextflow tag)      which instance of the step it is
``*_at_least``     a failed attempt's use       a lower bound, never a label
=================  ===========================  ==================================

Columns a reader does not produce (``io_kbps``, ``instance``, the lower bounds)
stay NULL or are left out, so SWF and HTCondor tasks are as before.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from panda_predictor.core.features.pipeline import TASK_COLUMNS

#: Our target name -> the job-log column holding its label (trace units).
LABEL_COLUMNS: dict[str, str] = {
    "walltime": "run_s",
    "cputime": "cpu_s",
    "ramcount": "used_memory_mb",
    "iointensity": "io_kbps",
}
#: Task column -> the job-frame column it copies, where the reader has it.
EXTRA_COLUMNS: dict[str, str] = {
    "taskname": "instance",
    # The cores the job ran on (known once it ran; never a feature): the replays
    # weigh a job's hours by them, as PanDA's ACTUALCORECOUNT.
    "actualcorecount": "procs",
    "walltime_at_least": "run_at_least_s",
    "ramcount_at_least": "used_memory_at_least_mb",
}


def _text(column: pd.Series) -> pd.Series:
    return column.astype(object).where(column.notna(), None)


def jobs_to_tasks(jobs: pd.DataFrame) -> pd.DataFrame:
    """Return one task row per job in the labelled-history schema, oldest first.

    ``jobs`` is a job frame (``read_swf``/``read_job_log``): it must be sorted by
    submit time and hold ``finish_s`` (NaN where the job never finished).
    """
    n = len(jobs)
    submit = pd.to_datetime(jobs["submit_time"]).to_numpy(dtype="datetime64[ns]")
    turnaround = (jobs["finish_s"] - jobs["submit_s"]).to_numpy(dtype=float)
    known_at = submit + pd.to_timedelta(turnaround, unit="s").to_numpy()
    nothing = pd.Series([None] * n, dtype=object)
    out = pd.DataFrame(
        {
            "jeditaskid": np.arange(1, n + 1, dtype=np.int64),
            "creationdate": submit,
            "processingtype": _text(jobs["queue"]).to_numpy(),
            "tasktype": nothing.to_numpy(),
            "prodsourcelabel": nothing.to_numpy(),
            "transhome": nothing.to_numpy(),
            "transuses": nothing.to_numpy(),
            "transpath": _text(jobs["executable"]).to_numpy(),
            "architecture": nothing.to_numpy(),
            "corecount": jobs["req_procs"].to_numpy(dtype=float),
            "workinggroup": _text(jobs["group"]).to_numpy(),
            "campaign": _text(jobs["partition"]).to_numpy(),
            "username": _text(jobs["user"]).to_numpy(),
            "n_input_datasets": np.full(n, np.nan),
            "nfiles_sum": np.full(n, np.nan),
            "nevents_sum": np.full(n, np.nan),
            "requested_walltime": jobs["req_time_s"].to_numpy(dtype=float),
            "requested_cputime": jobs["req_time_s"].to_numpy(dtype=float),
            "requested_ramcount": jobs["req_memory_mb"].to_numpy(dtype=float),
            "labels_known_at": known_at,
        }
    )
    for target, column in LABEL_COLUMNS.items():
        if column in jobs.columns:
            out[target] = jobs[column].to_numpy(dtype=float)
        else:
            out[target] = np.nan
    for name, column in EXTRA_COLUMNS.items():
        if column in jobs.columns:
            out[name] = jobs[column].to_numpy()
    assert set(TASK_COLUMNS) <= set(out.columns)
    return out
