"""Pure feedback: truth from the first finished jobs, job outcomes, weekly figures."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pytest

from panda_predictor.bins_file import load_bins
from panda_predictor.core.assess.feedback import (
    OutcomeParams,
    first_finished_as_scouts,
    iso_week,
    task_outcomes,
    weekly_summary,
)

T0 = datetime(2025, 3, 3, 8)


def _task(task_id: int) -> dict:
    return {
        "jeditaskid": task_id,
        "corecount": 1,
        "baseramcount": 0,
        "cpuefficiency": 90,
        "basewalltime": 600,
    }


def _jobs(
    task_id: int, pss_mb: float, n: int = 12, failed_memory: int = 0
) -> list[dict]:
    rows = []
    for i in range(n):
        start = T0 + timedelta(hours=i)
        failed = i < failed_memory
        rows.append(
            {
                "pandaid": task_id * 100 + i,
                "jeditaskid": task_id,
                "jobstatus": "failed" if failed else "finished",
                "specialhandling": None,
                "corecount": 1,
                "nevents": 100,
                "starttime": start,
                "endtime": start + timedelta(hours=2),
                "cpuconsumptiontime": 7000,
                "maxpss": int(pss_mb * 1024),
                "inputfilebytes": 10**9,
                "outputfilebytes": 10**8,
                "hs06sec": 72000,
                "minramcount": 2000 if not failed else int(pss_mb),
                "maxwalltime": 86400,
            }
        )
    return rows


def test_first_finished_jobs_become_the_scouts():
    jobs = pd.DataFrame(_jobs(1, 1000, n=12, failed_memory=2))
    marked = first_finished_as_scouts(jobs, 3)
    flagged = marked[marked["specialhandling"] == "sj"]
    assert list(flagged["pandaid"]) == [102, 103, 104]


def test_outcomes_find_under_allocation_and_memory_failures():
    bins = load_bins()
    edges = bins["ramcount"].edges
    small, big = float(edges[0]) / 2, float(edges[-1]) * 1.5
    jobs = pd.DataFrame(_jobs(1, small) + _jobs(2, big, failed_memory=3))
    tasks = pd.DataFrame([_task(1), _task(2)])
    audit = pd.DataFrame(
        {
            "jeditaskid": [1, 2, 3],
            "model_name": "m",
            "model_version": "1",
            "decision": ["applied", "applied", "kept_scouts"],
            "predicted_at": [T0, T0, T0],
            "ramcount_class": [0, 0, 0],
            "cputime_class": [0, 0, 0],
            "iointensity_class": [0, 0, 0],
            "walltime_class": [0, 0, 0],
        }
    )
    out = task_outcomes(audit, tasks, jobs, bins).set_index("jeditaskid")
    assert list(out.index) == [1, 2]  # task 3 has no jobs yet
    assert out.loc[1, "ramcount_true_class"] == 0
    top = bins["ramcount"].n_classes - 1
    assert out.loc[2, "ramcount_true_class"] == top
    assert out.loc[2, "n_failed_memory"] == 3 and out.loc[1, "n_failed_memory"] == 0
    assert out.loc[1, "mem_requested_gbh"] > out.loc[1, "mem_used_gbh"] > 0
    week = weekly_summary(out.reset_index())
    ram = week[week["target"] == "ramcount"].iloc[0]
    assert ram["week"] == "2025-W10"
    assert ram["accuracy"] == pytest.approx(0.5)
    assert ram["under_allocation"] == pytest.approx(0.5)
    assert ram["no_scout_share"] == 1.0 and ram["failed_memory_jobs"] == 3
    assert ram["unused_memory_gbh"] > 0


def test_weekly_summary_of_nothing_and_iso_weeks():
    assert weekly_summary(pd.DataFrame()).empty
    weeks = iso_week(pd.Series([datetime(2025, 1, 1), datetime(2024, 12, 30)]))
    assert list(weeks) == ["2025-W01", "2025-W01"]
    assert task_outcomes(
        pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), load_bins()
    ).empty


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"first_jobs": 0}, "'first_jobs' field must be a positive integer. Got 0"),
        ({"limit_share": 1.5}, r"'limit_share' field must be in \(0, 1\]. Got 1.5"),
    ],
    ids=["first-jobs", "limit-share"],
)
def test_outcome_params_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OutcomeParams(**kwargs)
