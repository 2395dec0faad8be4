"""Runner of the feedback loop: fill ``pp_task_outcome`` from JOBSARCHIVED4.

For the audited tasks predicted in a window, reads their task rows and job records,
computes the truth and job outcomes with
:func:`panda_predictor.core.assess.feedback.task_outcomes` and replaces their outcome
rows, chunk by chunk (one transaction per chunk, so a killed run loses at most a
chunk and a rerun simply rewrites it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pandas as pd

from panda_predictor.bins_file import bins_from_settings
from panda_predictor.core.assess.feedback import (
    OutcomeParams,
    decision_summary,
    task_outcomes,
    weekly_summary,
)
from panda_predictor.core.bins import BinSet
from panda_predictor.db.engine import make_engine
from panda_predictor.db.outcomes import (
    read_audit_frame,
    read_jobs,
    read_outcomes,
    read_tasks,
    upsert_outcomes,
)
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FeedbackRun:
    """What a feedback run did: tasks audited, outcomes written, weekly figures and
    the figures per decision (applied, held_back, shadow, kept_scouts)."""

    audited: int
    written: int
    weekly: pd.DataFrame
    by_decision: pd.DataFrame = field(default_factory=pd.DataFrame)


def run_feedback(
    settings: Settings,
    since: datetime | None = None,
    until: datetime | None = None,
    params: OutcomeParams | None = None,
    bins: BinSet | None = None,
    chunk_size: int = 2000,
    now: datetime | None = None,
) -> FeedbackRun:
    """Fill the outcome table for tasks predicted in ``[since, until)`` and summarise.

    Parameters
    ----------
    settings:
        Settings naming the database.
    since, until:
        Window of prediction times (``predicted_at``); default: everything.
    params:
        How many first jobs give the truth, and what counts as a limit failure.
    bins:
        Classes of the truth; default: the configured bins (those the models use).
    chunk_size:
        Tasks per transaction.
    now:
        Time stamp of ``evaluated_at`` (tests).
    """
    params = params or OutcomeParams()
    bins = bins or bins_from_settings(settings)
    stamp = now or datetime.now(UTC).replace(tzinfo=None)
    engine = make_engine(settings)
    written = 0
    try:
        with engine.connect() as conn:
            audit = read_audit_frame(conn, settings, since, until)
        for start in range(0, len(audit), chunk_size):
            part = audit.iloc[start : start + chunk_size]
            ids = part["jeditaskid"].astype(int).tolist()
            with engine.begin() as conn:
                tasks = read_tasks(conn, settings, ids)
                jobs = read_jobs(conn, settings, ids)
                outcomes = task_outcomes(part, tasks, jobs, bins, params)
                if outcomes.empty:
                    continue
                outcomes["evaluated_at"] = stamp
                written += upsert_outcomes(conn, settings, outcomes)
            log.info(
                "feedback: %d outcome rows for jediTaskID=%d..%d",
                len(outcomes),
                ids[0],
                ids[-1],
            )
        frame = read_outcomes(engine, settings, since, until)
    finally:
        engine.dispose()
    return FeedbackRun(
        len(audit), written, weekly_summary(frame), decision_summary(frame)
    )
