"""Runner of the what-if report: what shadow and held-back tasks would have got.

Reads the outcome rows that ``feedback`` filled (``pp_task_outcome``), the audit
rows of the same tasks (what the model predicted and whether it would have
applied) and their job records (the scouts' run times, the core-hours), and hands
them to :mod:`panda_predictor.core.assess.what_if`. Run ``feedback`` first: a task
without outcome rows is not in the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from panda_predictor.core.assess.what_if import (
    WHAT_IF_DECISIONS,
    job_figures,
    what_if_rows,
    what_if_summary,
)
from panda_predictor.db.engine import make_engine
from panda_predictor.db.outcomes import read_audit_frame, read_jobs, read_outcomes
from panda_predictor.settings import Settings

#: Column titles of the printed table, in order.
TITLES = {
    "group": "group",
    "tasks": "tasks",
    "would_apply": "would apply",
    "under_memory_tasks": "under mem",
    "under_time_tasks": "under time",
    "unscored_tasks": "unscored",
    "jobs_at_risk": "jobs at risk",
    "failed_memory_jobs_avoided": "mem fails avoided",
    "failed_time_jobs_avoided": "time fails avoided",
    "scout_hours_saved": "scout h saved",
    "scout_hours_per_task": "h/task",
    "model_unused_gbh": "unused GBh model",
    "scouts_unused_gbh": "unused GBh scouts",
}


@dataclass(frozen=True)
class WhatIfReport:
    """Per-task what-if rows and their summary per group (shadow, held_back, all)."""

    rows: pd.DataFrame
    summary: pd.DataFrame


def what_if_report(
    settings: Settings,
    since: datetime | None = None,
    until: datetime | None = None,
) -> WhatIfReport:
    """Return the what-if report of the tasks predicted in ``[since, until)``.

    Parameters
    ----------
    settings:
        Settings naming the database.
    since, until:
        Window of prediction times (``predicted_at``); default: everything.
    """
    engine = make_engine(settings)
    try:
        outcomes = read_outcomes(engine, settings, since, until)
        if not outcomes.empty:
            outcomes = outcomes[outcomes["decision"].isin(WHAT_IF_DECISIONS)]
        ids = outcomes["jeditaskid"].astype(int).tolist() if len(outcomes) else []
        with engine.connect() as conn:
            audit = read_audit_frame(conn, settings, since, until)
            jobs = read_jobs(conn, settings, ids) if ids else pd.DataFrame()
    finally:
        engine.dispose()
    audit = audit[audit["jeditaskid"].isin(ids)]
    rows = what_if_rows(outcomes, audit, job_figures(jobs))
    return WhatIfReport(rows, what_if_summary(rows))


def format_what_if(summary: pd.DataFrame) -> str:
    """Return the summary as a text table (hours and GB-hours with one decimal)."""
    if summary.empty:
        return (
            "No what-if figures: no shadow or held-back task has outcomes yet "
            "(run feedback once their jobs are in JOBSARCHIVED4)."
        )
    table = summary.rename(columns=TITLES)
    return table.to_string(index=False, float_format=lambda v: f"{v:.1f}", na_rep="-")
