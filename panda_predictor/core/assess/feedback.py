"""Compare the classes written for a task with what its jobs really needed.

Pure functions of frames (no database): the truth of a task is the scout formulas of
:func:`panda_predictor.core.labels.labels_frame` applied to its first finished jobs
(whether or not they were scouts, since a predicted task has none), and its job
outcomes are the failures for lack of memory or time and the memory requested but
unused. :func:`weekly_summary` turns outcome rows into the figures operators read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from panda_predictor.core.bins import BinSet
from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.label_values import DEFAULT_LABEL_PARAMS, LabelParams
from panda_predictor.core.labels import labels_frame

#: Decision of a task whose prediction was written (no scouts ran).
APPLIED = "applied"


@dataclass(frozen=True)
class OutcomeParams:
    """How job records are read as outcomes.

    Parameters
    ----------
    first_jobs:
        Finished jobs (earliest end first) the truth is measured on, as JEDI's
        ~10 scouts would be.
    limit_share:
        A failed job that used at least this share of its memory request (or of its
        walltime limit) failed for lack of memory (or time).
    """

    first_jobs: int = 10
    limit_share: float = 0.95

    def __post_init__(self) -> None:
        if int(self.first_jobs) < 1:
            raise ValueError(
                f"The 'first_jobs' field must be a positive integer. Got "
                f"{self.first_jobs!r} instead."
            )
        if not 0 < self.limit_share <= 1:
            raise ValueError(
                f"The 'limit_share' field must be in (0, 1]. Got {self.limit_share!r} "
                "instead."
            )


def first_finished_as_scouts(
    jobs: pd.DataFrame, first_jobs: int, params: LabelParams = DEFAULT_LABEL_PARAMS
) -> pd.DataFrame:
    """Return ``jobs`` with the scout flag on exactly each task's first finished jobs.

    Jobs are ordered by ENDTIME (then PANDAID); a predicted task ran no scouts, so
    its earliest finished jobs stand in for them.
    """
    out = jobs.copy()
    finished = out["jobstatus"] == params.finished_status
    order = out.assign(_end=pd.to_datetime(out["endtime"])).sort_values(
        ["jeditaskid", "_end", "pandaid"], kind="stable"
    )
    rank = order[finished.loc[order.index]].groupby("jeditaskid").cumcount()
    chosen = rank[rank < first_jobs].index
    out["specialhandling"] = None
    out.loc[chosen, "specialhandling"] = params.scout_flag
    return out


def _job_outcomes(jobs: pd.DataFrame, params: OutcomeParams) -> pd.DataFrame:
    """Return per task: job counts, failures by cause, memory and walltime use."""
    start = pd.to_datetime(jobs["starttime"])
    end = pd.to_datetime(jobs["endtime"])
    hours = ((end - start).dt.total_seconds() / 3600.0).clip(lower=0).fillna(0.0)
    req_mb = pd.to_numeric(jobs["minramcount"], errors="coerce").astype(float)
    used_mb = pd.to_numeric(jobs["maxpss"], errors="coerce").astype(float) / 1024.0
    limit_h = pd.to_numeric(jobs["maxwalltime"], errors="coerce").astype(float) / 3600.0
    failed = jobs["jobstatus"] == "failed"
    frame = pd.DataFrame(
        {
            "jeditaskid": pd.to_numeric(jobs["jeditaskid"]).astype(np.int64),
            "n_jobs": 1,
            "n_finished": (jobs["jobstatus"] == "finished").astype(int),
            "n_failed": failed.astype(int),
            "n_failed_memory": (
                failed & (used_mb >= params.limit_share * req_mb)
            ).astype(int),
            "n_failed_time": (failed & (hours >= params.limit_share * limit_h)).astype(
                int
            ),
            "mem_requested_gbh": (req_mb / 1024.0 * hours).fillna(0.0),
            "mem_used_gbh": (used_mb / 1024.0 * hours).fillna(0.0),
            "wall_requested_h": limit_h.fillna(0.0),
            "wall_used_h": hours,
            "first_job_at": start,
        }
    )
    sums = frame.drop(columns="first_job_at").groupby("jeditaskid").sum()
    sums["first_job_at"] = frame.groupby("jeditaskid")["first_job_at"].min()
    return sums.reset_index()


def task_outcomes(
    audit: pd.DataFrame,
    tasks: pd.DataFrame,
    jobs: pd.DataFrame,
    bins: BinSet,
    params: OutcomeParams = OutcomeParams(),
    label_params: LabelParams = DEFAULT_LABEL_PARAMS,
) -> pd.DataFrame:
    """Return one outcome row per audited task that has jobs.

    Parameters
    ----------
    audit:
        Audit rows: ``jeditaskid``, ``model_name``, ``model_version``, ``decision``,
        ``predicted_at`` and ``<target>_class`` (the classes written).
    tasks:
        JEDI_TASKS rows of those tasks (the columns the label formulas read).
    jobs:
        JOBSARCHIVED4 rows of those tasks.
    bins:
        Classes the truth is binned into (those the predictions used).
    params, label_params:
        Outcome and label-formula constants.

    Returns columns of ``pp_task_outcome`` but ``evaluated_at``: per target
    ``<t>_pred_class``, ``<t>_true_class`` (-1 when the jobs cannot measure it) and
    ``<t>_true_value``, plus the job outcomes.
    """
    if audit.empty or jobs.empty:
        return pd.DataFrame()
    with_jobs = audit[audit["jeditaskid"].isin(jobs["jeditaskid"])]
    if with_jobs.empty:
        return pd.DataFrame()
    marked = first_finished_as_scouts(jobs, params.first_jobs, label_params)
    # The truth in the model's units, whatever RAMUNIT/CPUTIMEUNIT the task now has
    # (the writer may have set MBPerCoreFixed, which PanDA's scouts never measure).
    in_model_units = tasks.drop(columns=["ramunit", "cputimeunit"], errors="ignore")
    labels = labels_frame(marked, in_model_units, label_params).set_index("jeditaskid")
    out = with_jobs[
        ["jeditaskid", "model_name", "model_version", "decision", "predicted_at"]
    ].copy()
    ids = out["jeditaskid"].to_numpy(np.int64)
    for target in TARGET_NAMES:
        truth = labels[target].reindex(ids).to_numpy(dtype=float)
        out[f"{target}_pred_class"] = (
            pd.to_numeric(with_jobs[f"{target}_class"])
            .fillna(-1)
            .astype(int)
            .to_numpy()
        )
        out[f"{target}_true_class"] = bins.assign(target, truth).astype(int)
        out[f"{target}_true_value"] = truth
    outcomes = _job_outcomes(jobs[jobs["jeditaskid"].isin(ids)], params)
    return out.merge(outcomes, on="jeditaskid", how="left").reset_index(drop=True)


def iso_week(times: pd.Series) -> pd.Series:
    """Return the ISO week (``2025-W07``) of each timestamp."""
    cal = pd.to_datetime(times).dt.isocalendar()
    return cal["year"].astype(str) + "-W" + cal["week"].astype(int).map("{:02d}".format)


def target_scores(outcomes: pd.DataFrame, target: str) -> dict[str, float]:
    """Return accuracy, under- and over-allocation rates of ``target`` over rows.

    Only rows where both the written and the true class are known count.
    """
    pred = outcomes[f"{target}_pred_class"].to_numpy(dtype=float)
    true = outcomes[f"{target}_true_class"].to_numpy(dtype=float)
    known = (pred >= 0) & (true >= 0)
    n = int(known.sum())
    if n == 0:
        return {
            "n": 0.0,
            "accuracy": np.nan,
            "under_allocation": np.nan,
            "over_allocation": np.nan,
        }
    p, t = pred[known], true[known]
    return {
        "n": float(n),
        "accuracy": float(np.mean(p == t)),
        "under_allocation": float(np.mean(p < t)),
        "over_allocation": float(np.mean(p > t)),
    }


def weekly_summary(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Return per ISO week and target: accuracy, under-/over-allocation, no-scout share.

    Columns: ``week``, ``target``, ``tasks``, ``scored``, ``accuracy``,
    ``under_allocation``, ``over_allocation``, ``no_scout_share`` (share of the
    week's tasks decided without scouts), ``failed_memory_jobs``,
    ``failed_time_jobs`` and ``unused_memory_gbh`` (memory requested minus used, in
    GB-hours, over the week's jobs; the same for every target row of a week).
    """
    columns = [
        "week",
        "target",
        "tasks",
        "scored",
        "accuracy",
        "under_allocation",
        "over_allocation",
        "no_scout_share",
        "failed_memory_jobs",
        "failed_time_jobs",
        "unused_memory_gbh",
    ]
    if outcomes.empty:
        return pd.DataFrame(columns=columns)
    frame = outcomes.assign(week=iso_week(outcomes["predicted_at"]))
    rows = []
    for week, part in frame.groupby("week", sort=True):
        shared = {
            "tasks": int(len(part)),
            "no_scout_share": float(np.mean(part["decision"] == APPLIED)),
            "failed_memory_jobs": int(part["n_failed_memory"].fillna(0).sum()),
            "failed_time_jobs": int(part["n_failed_time"].fillna(0).sum()),
            "unused_memory_gbh": float(
                (part["mem_requested_gbh"] - part["mem_used_gbh"]).clip(lower=0).sum()
            ),
        }
        for target in TARGET_NAMES:
            scores = target_scores(part, target)
            rows.append(
                {
                    "week": week,
                    "target": target,
                    "scored": int(scores["n"]),
                    "accuracy": scores["accuracy"],
                    "under_allocation": scores["under_allocation"],
                    "over_allocation": scores["over_allocation"],
                    **shared,
                }
            )
    return pd.DataFrame(rows, columns=columns)


def decision_summary(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Return the outcome figures per decision, so rollout groups compare side by side.

    ``applied`` tasks ran with the predicted values, ``held_back`` ones (outside the
    rollout share, chosen by a hash of jediTaskID, so alike in expectation) and
    ``shadow``/``kept_scouts`` ones with their scouts. Per decision: ``tasks``,
    ``jobs``, failed jobs for lack of memory and time per 100 jobs, unused memory
    GB-hours per task, and per target the prediction's accuracy and
    under-allocation (for tasks not applied: of the prediction that was not used).
    """
    columns = [
        "decision",
        "tasks",
        "jobs",
        "failed_memory_per_100_jobs",
        "failed_time_per_100_jobs",
        "unused_memory_gbh_per_task",
        *(f"{t}_{s}" for t in TARGET_NAMES for s in ("accuracy", "under")),
    ]
    if outcomes.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for decision, part in outcomes.groupby("decision", sort=True):
        jobs = float(part["n_jobs"].fillna(0).sum())
        unused = (part["mem_requested_gbh"] - part["mem_used_gbh"]).clip(lower=0)
        row = {
            "decision": decision,
            "tasks": int(len(part)),
            "jobs": int(jobs),
            "failed_memory_per_100_jobs": (
                100.0 * float(part["n_failed_memory"].fillna(0).sum()) / jobs
                if jobs
                else np.nan
            ),
            "failed_time_per_100_jobs": (
                100.0 * float(part["n_failed_time"].fillna(0).sum()) / jobs
                if jobs
                else np.nan
            ),
            "unused_memory_gbh_per_task": float(unused.fillna(0).mean()),
        }
        for target in TARGET_NAMES:
            scores = target_scores(part, target)
            row[f"{target}_accuracy"] = scores["accuracy"]
            row[f"{target}_under"] = scores["under_allocation"]
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)
