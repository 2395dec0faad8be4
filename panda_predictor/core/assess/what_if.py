"""What would have happened had the model decided: shadow and held-back tasks.

A task audited ``shadow`` or ``held_back`` ran with its scouts, so its jobs show
what it really needed; its audit row keeps what the model predicted and whether it
would have applied. For each such task that the model would have applied, this
module compares the two (pure frames, no database):

- **failures caused**: a predicted class below the measured one (memory:
  ``ramcount``; time: ``cputime`` or ``walltime``) would have started the task's
  jobs under-allocated; all its jobs count as at risk;
- **unscored**: a task whose jobs could not measure its memory or CPU need counts
  for nothing below (neither avoided failures nor saved hours);
- **failures avoided**: jobs that failed for lack of memory (time) under the scouts'
  values, in a task whose predicted class covered the measured need;
- **scout hours saved**: the scout cost model of the replay
  (:func:`panda_predictor.core.replay.engine.scout_delay`): the bulk of a task waits
  until its slowest scout finished; only a prediction that covered the measured memory
  and time saves it;
- **waste**: memory the predicted ramCount would have reserved but the jobs did not
  use (predicted MB per core x core-hours of the jobs, minus the GB-hours used; the
  per-job ``baseRamCount`` is left out on both sides), beside what the scouts'
  values really left unused.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from panda_predictor.core.decide.rollout import HELD_BACK, SHADOW, would_apply

#: Decisions whose tasks ran with scouts while the model's choice is known.
WHAT_IF_DECISIONS = (SHADOW, HELD_BACK)
#: Targets whose under-allocation makes a job fail for lack of time.
TIME_TARGETS = ("cputime", "walltime")

SUMMARY_COLUMNS = [
    "group",
    "tasks",
    "would_apply",
    "under_memory_tasks",
    "under_time_tasks",
    "unscored_tasks",
    "jobs_at_risk",
    "failed_memory_jobs_avoided",
    "failed_time_jobs_avoided",
    "scout_hours_saved",
    "scout_hours_per_task",
    "model_unused_gbh",
    "scouts_unused_gbh",
]


def job_figures(jobs: pd.DataFrame, scout_flag: str = "sj") -> pd.DataFrame:
    """Return per task the slowest scout's run time and the jobs' core-hours.

    Parameters
    ----------
    jobs:
        JOBSARCHIVED4 rows: ``jeditaskid``, ``specialhandling``, ``corecount``,
        ``starttime``, ``endtime``.
    scout_flag:
        The ``specialhandling`` mark of a scout job (PanDA: ``sj``).

    Returns columns ``jeditaskid``, ``scout_wait_h`` (0 without a scout job) and
    ``core_hours``.
    """
    if jobs.empty:
        return pd.DataFrame(columns=["jeditaskid", "scout_wait_h", "core_hours"])
    start = pd.to_datetime(jobs["starttime"])
    end = pd.to_datetime(jobs["endtime"])
    hours = ((end - start).dt.total_seconds() / 3600.0).clip(lower=0).fillna(0.0)
    cores = pd.to_numeric(jobs["corecount"], errors="coerce").fillna(1).clip(lower=1)
    marks = jobs["specialhandling"].fillna("").astype(str).str.split(",")
    scout = marks.map(lambda parts: scout_flag in parts)
    frame = pd.DataFrame(
        {
            "jeditaskid": pd.to_numeric(jobs["jeditaskid"]).astype(np.int64),
            "scout_wait_h": hours.where(scout, 0.0),
            "core_hours": hours * cores,
        }
    )
    grouped = frame.groupby("jeditaskid")
    return pd.DataFrame(
        {
            "scout_wait_h": grouped["scout_wait_h"].max(),
            "core_hours": grouped["core_hours"].sum(),
        }
    ).reset_index()


def _classes(frame: pd.DataFrame, target: str) -> tuple[pd.Series, pd.Series]:
    """Return (known, under) of a target: both classes known, predicted below."""
    pred = pd.to_numeric(frame[f"{target}_pred_class"]).fillna(-1)
    true = pd.to_numeric(frame[f"{target}_true_class"]).fillna(-1)
    known = (pred >= 0) & (true >= 0)
    return known, known & (pred < true)


def what_if_rows(
    outcomes: pd.DataFrame, audit: pd.DataFrame, jobs: pd.DataFrame
) -> pd.DataFrame:
    """Return one what-if row per shadow or held-back task with outcomes.

    Parameters
    ----------
    outcomes:
        ``pp_task_outcome`` rows (classes predicted and measured, job outcomes).
    audit:
        Audit rows of the same tasks: ``jeditaskid``, ``reason``,
        ``ramcount_value`` (the predicted MB per core).
    jobs:
        :func:`job_figures` of the same tasks.
    """
    if outcomes.empty:
        return pd.DataFrame(columns=["jeditaskid", "group"])
    part = outcomes[outcomes["decision"].isin(WHAT_IF_DECISIONS)]
    frame = (
        part.merge(
            audit[["jeditaskid", "reason", "ramcount_value"]],
            on="jeditaskid",
            how="left",
        )
        .merge(jobs, on="jeditaskid", how="left")
        .reset_index(drop=True)
    )
    applies = frame["reason"].map(would_apply).astype(bool)
    memory_known, memory = _classes(frame, "ramcount")
    cpu_known, cpu_under = _classes(frame, TIME_TARGETS[0])
    _, wall_under = _classes(frame, TIME_TARGETS[1])
    time = cpu_under | wall_under
    # Only a measured need can be covered: a task whose jobs could not measure it
    # is counted as unscored, never as a saving.
    covered_memory = memory_known & ~memory
    covered_time = cpu_known & ~time
    zero = pd.Series(0.0, index=frame.index)
    n_jobs = pd.to_numeric(frame["n_jobs"]).fillna(0)
    used = pd.to_numeric(frame["mem_used_gbh"]).fillna(0.0)
    requested = pd.to_numeric(frame["mem_requested_gbh"]).fillna(0.0)
    predicted_mb = pd.to_numeric(frame["ramcount_value"], errors="coerce")
    core_hours = pd.to_numeric(frame["core_hours"]).fillna(0.0)
    model_reserved = predicted_mb * core_hours / 1024.0
    return pd.DataFrame(
        {
            "jeditaskid": frame["jeditaskid"].astype(np.int64),
            "group": frame["decision"],
            "would_apply": applies,
            "under_memory": applies & memory,
            "under_time": applies & time,
            "unscored": applies & ~(memory_known & cpu_known),
            "jobs_at_risk": n_jobs.where(applies & (memory | time), zero),
            "failed_memory_jobs_avoided": pd.to_numeric(frame["n_failed_memory"])
            .fillna(0)
            .where(applies & covered_memory, zero),
            "failed_time_jobs_avoided": pd.to_numeric(frame["n_failed_time"])
            .fillna(0)
            .where(applies & covered_time, zero),
            "scout_hours_saved": pd.to_numeric(frame["scout_wait_h"])
            .fillna(0.0)
            .where(applies & covered_memory & covered_time, zero),
            "model_unused_gbh": (model_reserved - used)
            .clip(lower=0)
            .where(applies & predicted_mb.notna(), zero),
            "scouts_unused_gbh": (requested - used).clip(lower=0).where(applies, zero),
        }
    )


def what_if_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Return the what-if figures per group (``shadow``, ``held_back``) and, with
    both, in ``all``.

    Columns: :data:`SUMMARY_COLUMNS`; ``scout_hours_per_task`` is per task that
    would have applied (NaN when none would).
    """
    if rows.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    out = []
    groups: list[tuple[str, pd.DataFrame]] = [
        (g, rows[rows["group"] == g])
        for g in WHAT_IF_DECISIONS
        if (rows["group"] == g).any()
    ]
    if len(groups) > 1:  # a total only when it adds something
        groups.append(("all", rows))
    for name, part in groups:
        applying = int(part["would_apply"].sum())
        saved = float(part["scout_hours_saved"].sum())
        out.append(
            {
                "group": name,
                "tasks": int(len(part)),
                "would_apply": applying,
                "under_memory_tasks": int(part["under_memory"].sum()),
                "under_time_tasks": int(part["under_time"].sum()),
                "unscored_tasks": int(part["unscored"].sum()),
                "jobs_at_risk": int(part["jobs_at_risk"].sum()),
                "failed_memory_jobs_avoided": int(
                    part["failed_memory_jobs_avoided"].sum()
                ),
                "failed_time_jobs_avoided": int(part["failed_time_jobs_avoided"].sum()),
                "scout_hours_saved": saved,
                "scout_hours_per_task": saved / applying if applying else np.nan,
                "model_unused_gbh": float(part["model_unused_gbh"].sum()),
                "scouts_unused_gbh": float(part["scouts_unused_gbh"].sum()),
            }
        )
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)
