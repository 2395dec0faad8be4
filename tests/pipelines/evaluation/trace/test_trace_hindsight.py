"""The hindsight row: the production row with the scouts kept on chosen tasks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.bins import TargetBins
from panda_predictor.core.replay.engine import JobOutcomes
from pipelines.evaluation.trace.hindsight import (
    format_hindsight,
    hindsight_row,
    kept_by_hindsight,
)
from pipelines.evaluation.trace.replay import replay_target
from pipelines.evaluation.trace.target_run import TargetRun

GB_H = 1024.0  # MB-hours per GB-hour: every job below runs one hour on one core


def _outcomes(failed, wasted, delay_s) -> JobOutcomes:
    n = len(failed)
    zeros = np.zeros(n)
    return JobOutcomes(
        failed=np.asarray(failed, dtype=bool),
        lost=np.zeros(n, dtype=bool),
        attempts=np.asarray(failed, dtype=int),
        lost_s=zeros,
        lost_core_hours=zeros,
        lost_gb_hours=zeros,
        wasted_hours=np.asarray(wasted, dtype=float),
        task_bulk_delay_s=np.asarray(delay_s, dtype=float),
    )


# Four tasks: 0 (jobs 0-1), 1 (jobs 2-3), 2 (job 4), 3 (jobs 5-6).
TASK = np.array([0, 0, 1, 1, 2, 3, 3])
# Start at once: no job waits. The scouts, per task: 0 wastes 10 h less for 100 s
# of delay; 1 wastes 2 h less for 1000 s; 2 fails one job less at no delay; 3
# wastes 5 h more. The scouts' delay sums to 1600 s.
MINE = _outcomes([0, 0, 0, 0, 1, 0, 0], [10, 10, 3, 3, 1, 1, 1], [0, 0, 0, 0])
SCOUTS = _outcomes([0, 0, 0, 0, 0, 0, 0], [5, 5, 2, 2, 1, 3, 4], [100, 1000, 0, 500])


@pytest.mark.parametrize(
    ("share", "kept"),
    [(0.0, [2]), (0.2, [0, 2]), (1.0, [0, 1, 2])],
    ids=["no-delay", "goal", "all-delay"],
)
def test_the_scouts_are_kept_where_they_help_most_per_second_of_delay(share, kept):
    # Budget: share x 1600 s. Task 2 costs no delay; task 0 helps most per second
    # (10 h for 100 s); task 1 needs 1000 s; task 3 is never worth scouting.
    chosen = kept_by_hindsight(MINE, SCOUTS, TASK, max_delay_share=share)
    assert np.flatnonzero(chosen).tolist() == kept


def test_a_task_that_does_not_fit_the_budget_leaves_room_for_a_smaller_one():
    # Task 1 now helps most per second (116 h for 1000 s) but needs 1000 s; with
    # 320 s to spend, task 0 (10 h for 100 s) still fits.
    mine = _outcomes([0, 0, 0, 0, 1, 0, 0], [10, 10, 60, 60, 1, 1, 1], [0, 0, 0, 0])
    chosen = kept_by_hindsight(mine, SCOUTS, TASK, max_delay_share=0.2)
    assert np.flatnonzero(chosen).tolist() == [0, 2]
    assert np.flatnonzero(kept_by_hindsight(mine, SCOUTS, TASK, 1.0)).tolist() == [
        0,
        1,
        2,
    ]


def _case(written: float):
    """Task A (5 jobs of 1800 MB) skips its scouts and writes ``written`` MB; task
    B (2 jobs of 900 MB) keeps them. Every job asks the user's 4000 MB."""
    used = np.array([1800.0] * 5 + [900.0] * 2)
    n = used.size
    frame = pd.DataFrame(
        {
            "submit_s": [10.0 * i for i in range(5)] + [0.0, 10.0],
            "run_s": [3600.0] * n,
            "procs": [1.0] * n,
            "req_memory_mb": [4000.0] * n,
        }
    )
    bins = TargetBins("ramcount", edges=(1500.0, 3000.0), values=(1000, 2000, 4000))
    run = TargetRun("ramcount", bins, np.arange(n), bins.assign(used), used)
    run.predicted = {"model:x": np.full(n, 2)}
    run.confidence = {"model:x": np.full(n, 0.9)}
    run.applied = {"model:x": np.arange(n) < 5}
    run.values = {"model:x": np.full(n, written)}
    key = np.array([1] * 5 + [2] * 2)
    return replay_target(frame, run, key, ["model:x"], 1.0)


def test_writing_the_request_is_beaten_by_scouting_it_with_enough_delay():
    # A writes the request: jobs 4-5 hold 4000 MB where the scouted task holds
    # PanDA's measurement of its scouts, 1980 MB. Scouting A costs its bulk an
    # hour (the scouts' whole delay), so only a delay share of 1 allows it, and
    # then the row is the scouts' own.
    replayed = _case(4000.0)
    rows = {o.strategy: o for o in replayed.outcomes}
    mine, scouts = rows["predictor (model:x)"], rows["scouts"]
    assert mine.wasted_gb_hours - scouts.wasted_gb_hours == pytest.approx(
        2 * (4000 - 1980) / GB_H
    )
    within_goal = hindsight_row(replayed, "model:x")
    assert (within_goal.kept_tasks, within_goal.tasks) == (1, 2)  # B, as decided
    assert within_goal.outcome.wasted_gb_hours == pytest.approx(mine.wasted_gb_hours)
    assert within_goal.goals["failed_jobs"] and not within_goal.goals["waste"]
    any_delay = hindsight_row(replayed, "model:x", max_delay_share=1.0)
    assert any_delay.kept_tasks == 2
    o = any_delay.outcome
    assert (o.failed_job_rate, o.mean_bulk_delay_hours) == (
        scouts.failed_job_rate,
        scouts.mean_bulk_delay_hours,
    )
    assert o.wasted_gb_hours == pytest.approx(scouts.wasted_gb_hours)
    assert any_delay.goals == {
        "failed_jobs": True,
        "waste": True,
        "bulk_delay": True,
        "not_dominated": True,
    }
    text = format_hindsight("ramcount", "model:x", any_delay)
    assert "scouts kept on 2 of 2 tasks" in text and "(✓✓✓✓)" in text
    assert f"waste {scouts.wasted_gb_hours:.4g} GB-h" in text
    assert "could meet the goals" in text
    assert "does not meet" in format_hindsight("ramcount", "model:x", within_goal)


def test_values_the_scouts_cannot_better_keep_no_scouts():
    # A writes 2000 MB: less waste than its scouts everywhere, no failure.
    replayed = _case(2000.0)
    row = hindsight_row(replayed, "model:x", max_delay_share=1.0)
    assert row.kept_tasks == 1  # B only, as the decision kept it
    mine = {o.strategy: o for o in replayed.outcomes}["predictor (model:x)"]
    assert row.outcome.wasted_gb_hours == pytest.approx(mine.wasted_gb_hours)
    assert row.to_dict()["outcome"]["failed_job_rate"] == mine.failed_job_rate


def test_the_hindsight_row_needs_a_replayed_model():
    with pytest.raises(ValueError, match="The 'model' field must name a replayed"):
        hindsight_row(_case(2000.0), "model:y")
