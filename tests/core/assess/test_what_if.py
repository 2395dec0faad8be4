"""The what-if and per-decision arithmetic on a small hand-made case."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.assess.feedback import decision_summary
from panda_predictor.core.assess.what_if import (
    job_figures,
    what_if_rows,
    what_if_summary,
)


def _outcome(task_id, decision, ram, cpu, **jobs):
    """One outcome row: (pred, true) classes of ramcount and cputime, job figures."""
    row = {
        "jeditaskid": task_id,
        "decision": decision,
        "predicted_at": datetime(2026, 11, 2),
        "ramcount_pred_class": ram[0],
        "ramcount_true_class": ram[1],
        "cputime_pred_class": cpu[0],
        "cputime_true_class": cpu[1],
        "walltime_pred_class": 0,
        "walltime_true_class": 0,
        "iointensity_pred_class": 1,
        "iointensity_true_class": 1,
        "n_jobs": 10,
        "n_failed_memory": 0,
        "n_failed_time": 0,
        "mem_requested_gbh": 0.0,
        "mem_used_gbh": 0.0,
    }
    row.update(jobs)
    return row


OUTCOMES = pd.DataFrame(
    [
        # Would apply, covers the need; its scouted run lost 2 jobs to memory.
        _outcome(1, "shadow", (2, 1), (1, 1), n_failed_memory=2,
                 mem_requested_gbh=30.0, mem_used_gbh=10.0),
        # Would apply, memory class too low: its 10 jobs were at risk.
        _outcome(2, "shadow", (1, 2), (1, 1), n_failed_time=1),
        # Would keep scouts: no what-if figures.
        _outcome(3, "shadow", (0, 2), (0, 2), n_failed_memory=4),
        # Held back, would apply, right; 1 time failure avoided.
        _outcome(4, "held_back", (1, 1), (2, 2), n_failed_time=1,
                 mem_requested_gbh=8.0, mem_used_gbh=6.0),
        # Applied: not a what-if task.
        _outcome(5, "applied", (1, 1), (1, 1), n_failed_memory=1),
    ]
)  # fmt: skip
AUDIT = pd.DataFrame(
    {
        "jeditaskid": [1, 2, 3, 4, 5],
        "reason": [
            "shadow: would apply",
            "shadow: would apply",
            "shadow: would keep scouts: low confidence: ramcount 0.41 < 0.60",
            "held back (rollout_share=0.5): would apply",
            "confident",
        ],
        "ramcount_value": [3000, 2000, 1000, 2000, 2000],
    }
)
START = datetime(2026, 11, 2, 0, 0)


def _job(task_id, hours, cores=8, scout=False):
    return {
        "jeditaskid": task_id,
        "specialhandling": "ddm:rucio,sj" if scout else None,
        "corecount": cores,
        "starttime": START,
        "endtime": START + pd.Timedelta(hours=hours),
    }


JOBS = pd.DataFrame(
    [
        _job(1, 2.0, scout=True),
        _job(1, 3.0, scout=True),  # the slowest scout: the bulk waited 3 h
        _job(1, 1.0),
        _job(2, 5.0, scout=True),
        _job(4, 1.5, cores=4, scout=True),
        _job(4, 0.5, cores=4),
    ]
)


def test_job_figures_take_the_slowest_scout_and_sum_core_hours():
    figures = job_figures(JOBS).set_index("jeditaskid")
    assert figures.loc[1, "scout_wait_h"] == pytest.approx(3.0)
    assert figures.loc[1, "core_hours"] == pytest.approx((2 + 3 + 1) * 8)
    assert figures.loc[4, "scout_wait_h"] == pytest.approx(1.5)
    assert figures.loc[4, "core_hours"] == pytest.approx((1.5 + 0.5) * 4)


def test_what_if_rows_by_hand():
    rows = what_if_rows(OUTCOMES, AUDIT, job_figures(JOBS)).set_index("jeditaskid")
    assert sorted(rows.index) == [1, 2, 3, 4]  # the applied task is no what-if
    assert list(rows["would_apply"]) == [True, True, False, True]
    # Task 1: covered, so its 2 memory failures are avoided and its 3 h saved;
    # 3000 MB/core x 48 core-h = 140.625 GB-h reserved, 10 used.
    assert rows.loc[1, "failed_memory_jobs_avoided"] == 2
    assert rows.loc[1, "scout_hours_saved"] == pytest.approx(3.0)
    assert rows.loc[1, "model_unused_gbh"] == pytest.approx(3000 * 48 / 1024 - 10)
    assert rows.loc[1, "scouts_unused_gbh"] == pytest.approx(20.0)
    # Task 2: under-allocated memory: all 10 jobs at risk, no hours saved, but its
    # time class was right, so its time failure is avoided.
    assert rows.loc[2, "under_memory"] and not rows.loc[2, "under_time"]
    assert rows.loc[2, "jobs_at_risk"] == 10
    assert rows.loc[2, "scout_hours_saved"] == 0
    assert rows.loc[2, "failed_time_jobs_avoided"] == 1
    # Task 3 would have kept its scouts: nothing counts for it.
    assert rows.loc[3, ["jobs_at_risk", "failed_memory_jobs_avoided"]].sum() == 0


def test_what_if_summary_by_group_and_in_all():
    rows = what_if_rows(OUTCOMES, AUDIT, job_figures(JOBS))
    summary = what_if_summary(rows).set_index("group")
    assert list(summary.index) == ["shadow", "held_back", "all"]
    shadow, held = summary.loc["shadow"], summary.loc["held_back"]
    every = summary.loc["all"]
    assert (shadow["tasks"], shadow["would_apply"]) == (3, 2)
    assert (shadow["under_memory_tasks"], shadow["jobs_at_risk"]) == (1, 10)
    assert shadow["scout_hours_saved"] == pytest.approx(3.0)
    assert shadow["scout_hours_per_task"] == pytest.approx(1.5)
    assert held["failed_time_jobs_avoided"] == 1
    # Task 4: 2000 MB/core x 8 core-h = 15.625 GB-h reserved, 6 used.
    assert held["model_unused_gbh"] == pytest.approx(2000 * 8 / 1024 - 6)
    assert held["scouts_unused_gbh"] == pytest.approx(2.0)
    assert every["scout_hours_saved"] == pytest.approx(4.5)
    assert every["tasks"] == 4


def test_one_group_has_no_total_row():
    rows = what_if_rows(OUTCOMES, AUDIT, job_figures(JOBS))
    summary = what_if_summary(rows[rows["group"] == "shadow"])
    assert list(summary["group"]) == ["shadow"]


def test_no_what_if_task_gives_empty_tables():
    applied_only = OUTCOMES[OUTCOMES["decision"] == "applied"]
    rows = what_if_rows(applied_only, AUDIT, job_figures(JOBS))
    assert rows.empty and what_if_summary(rows).empty


def test_decision_summary_compares_the_groups():
    summary = decision_summary(OUTCOMES).set_index("decision")
    assert sorted(summary.index) == ["applied", "held_back", "shadow"]
    # shadow: 30 jobs, 2 + 4 memory failures, 1 time failure.
    assert summary.loc["shadow", "failed_memory_per_100_jobs"] == pytest.approx(20.0)
    assert summary.loc["shadow", "failed_time_per_100_jobs"] == pytest.approx(100 / 30)
    assert summary.loc["applied", "failed_memory_per_100_jobs"] == pytest.approx(10.0)
    assert summary.loc["held_back", "unused_memory_gbh_per_task"] == pytest.approx(2)
    # ramcount classes in shadow: (2,1) over, (1,2) under, (0,2) under.
    assert summary.loc["shadow", "ramcount_under"] == pytest.approx(2 / 3)
    assert summary.loc["shadow", "ramcount_accuracy"] == pytest.approx(0.0)
    assert np.isclose(summary.loc["held_back", "cputime_accuracy"], 1.0)
