"""The trace replay's strategies and the goal summary, on two hand-made tasks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.bins import TargetBins
from panda_predictor.core.replay import ReplayOutcome, ReplayRules
from panda_predictor.core.replay_goals import replay_goals
from pipelines.trace.replay_run import format_goals, format_replay, replay_target
from pipelines.trace.walk_forward import TargetRun

GB_H = 1024.0  # MB-hours per GB-hour: every job below runs one hour on one core


def make_case(used_a: list[float], used_b: list[float]):
    """Return (frame, run, key): task A (key 1) and task B (key 2), one-hour jobs.

    Every job asks the user's 4000 MB; the model predicts class 1 (2000 MB) with
    confidence 0.9 on task A and 0.1 on task B; the recency rule says 1700 MB.
    """
    n_a, n_b = len(used_a), len(used_b)
    n = n_a + n_b
    frame = pd.DataFrame(
        {
            "submit_s": [10.0 * i for i in range(n_a)] + [10.0 * i for i in range(n_b)],
            "run_s": [3600.0] * n,
            "procs": [1.0] * n,
            "req_memory_mb": [4000.0] * n,
        }
    )
    bins = TargetBins("ramcount", edges=(1500.0, 3000.0), values=(1000, 2000, 4000))
    used = np.array(used_a + used_b, dtype=float)
    run = TargetRun("ramcount", bins, np.arange(n), bins.assign(used), used)
    run.predicted = {
        "model:x": np.full(n, 1),
        "baseline:request": np.full(n, 2),
        "baseline:user_last2_mean": np.full(n, 1),
        "baseline:majority": np.full(n, 2),
    }
    run.raw = {
        "baseline:request": np.full(n, 4000.0),
        "baseline:user_last2_mean": np.full(n, 1700.0),
    }
    run.confidence = {"model:x": np.array([0.9] * n_a + [0.1] * n_b)}
    key = np.array([1] * n_a + [2] * n_b)
    return frame, run, key


@pytest.fixture
def outcomes() -> dict[str, ReplayOutcome]:
    frame, run, key = make_case([1800.0] * 5, [900.0] * 2)
    return {o.strategy: o for o in replay_target(frame, run, key, ["model:x"], 0.6)}


def test_every_strategy_is_replayed_on_the_same_jobs(outcomes):
    assert list(outcomes) == [
        "scouts",
        "predictor (model:x)",
        "predictor (model:x+refine)",
        "rule (baseline:user_last2_mean)",
        "rule (baseline:majority)",
        "user request",
        "oracle",
    ]
    assert {(o.n_jobs, o.n_tasks) for o in outcomes.values()} == {(7, 2)}


def test_scouts_and_predictor_by_hand(outcomes):
    scouts = outcomes["scouts"]
    # A: 3 scouts at 4000, 2 bulk jobs at 1800 * 1.1; B: 2 scouts at 4000.
    assert scouts.wasted_gb_hours == pytest.approx(
        (3 * 2200 + 2 * 180 + 2 * 3100) / GB_H
    )
    assert scouts.mean_bulk_delay_hours == pytest.approx(0.5)
    predictor = outcomes["predictor (model:x)"]
    # A (confident) asks 2000 at once; B keeps its scouts.
    assert predictor.wasted_gb_hours == pytest.approx((5 * 200 + 2 * 3100) / GB_H)
    assert predictor.mean_bulk_delay_hours == 0.0
    refine = outcomes["predictor (model:x+refine)"]
    # After A's first 3 jobs, the rest asks 1800 * 1.1 = 1980.
    assert refine.wasted_gb_hours == pytest.approx(
        (3 * 200 + 2 * 180 + 2 * 3100) / GB_H
    )


def test_a_rule_that_asks_too_little_fails_jobs_the_panda_way(outcomes):
    rule = outcomes["rule (baseline:user_last2_mean)"]
    # A's jobs ask 1700 and use 1800: jobs 0 and 1 get the 2000 step; at job 2,
    # 2/5 files are above the task: the task goes to 2000 and jobs 3-4 pass.
    assert rule.failed_job_rate == pytest.approx(3 / 7)
    assert rule.lost_core_hours == pytest.approx(3.0)
    assert rule.lost_gb_hours == pytest.approx(3 * 1700 / GB_H)


def test_the_production_decision_wins_over_the_confidence():
    frame, run, key = make_case([1800.0] * 5, [900.0] * 2)
    run.applied = {"model:x": np.zeros(7, dtype=bool)}  # every task kept its scouts
    got = {o.strategy: o for o in replay_target(frame, run, key, ["model:x"], 0.0)}
    assert (
        dataclasses.replace(got["predictor (model:x)"], strategy="scouts")
        == (got["scouts"])
    )


def test_pandas_second_look_resizes_a_scouted_task():
    # Scouts see at most 1200: the bulk asks 1320, job 3 (1800) fails and is raised.
    # With a second look after one more finished job, job 4 asks 1800 * 1.1.
    frame, run, key = make_case([1000.0, 1200.0, 1100.0, 1800.0, 1300.0], [900.0])
    without = replay_target(
        frame, run, key, [], 0.6, rules=ReplayRules(second_look_jobs=0)
    )
    with_look = replay_target(
        frame, run, key, [], 0.6, rules=ReplayRules(second_look_jobs=1)
    )
    assert without[0].failed_job_rate == with_look[0].failed_job_rate == 1 / 6
    assert with_look[0].wasted_gb_hours - without[0].wasted_gb_hours == pytest.approx(
        (1980 - 1320) / GB_H
    )


def test_goals_against_scouts(outcomes):
    goals = replay_goals(list(outcomes.values()), "predictor (model:x)")
    assert (goals["failed_jobs"], goals["waste"], goals["bulk_delay"]) == (
        True,
        True,
        True,
    )
    assert goals["all"]
    rule = replay_goals(list(outcomes.values()), "rule (baseline:user_last2_mean)")
    assert not rule["failed_jobs"] and rule["bulk_delay"] and not rule["all"]
    line = format_goals("ramcount", list(outcomes.values()), "predictor (model:x)")
    assert line.startswith("ramcount, predictor (model:x) vs scouts:")
    assert line.endswith("(all goals met)")


def outcome(name: str, failed: float, waste: float, delay: float) -> ReplayOutcome:
    return ReplayOutcome(name, 10, 2, failed, 0.0, 0.0, waste, delay, 0.0)


def test_the_delay_goal_is_a_fifth_of_the_scouts_wait():
    rows = [
        outcome("scouts", 0.1, 10.0, 1.0),
        outcome("fast", 0.1, 10.0, 0.2),
        outcome("slow", 0.05, 5.0, 0.21),
    ]
    assert replay_goals(rows, "fast")["all"]
    slow = replay_goals(rows, "slow")
    assert slow["failed_jobs"] and slow["waste"] and not slow["bulk_delay"]


def test_format_replay_marks_the_goals(outcomes):
    table = format_replay("ramcount", list(outcomes.values())).splitlines()
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(outcomes)
    assert rows[0].startswith("| scouts |") and rows[0].endswith("| - |")
    assert rows[1].startswith("| predictor (model:x) |") and rows[1].endswith("✓✓✓ |")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strategy": "nobody"}, "'strategy' field must name a replayed strategy"),
        ({"reference": "nobody"}, "'strategy' field must name a replayed strategy"),
        ({"max_delay_share": 1.5}, "'max_delay_share' field must be in"),
    ],
    ids=["unknown-strategy", "unknown-reference", "share-above-one"],
)
def test_replay_goals_errors(kwargs, match):
    rows = [outcome("scouts", 0.1, 1.0, 1.0), outcome("fast", 0.0, 0.0, 0.0)]
    with pytest.raises(ValueError, match=match):
        replay_goals(rows, **{"strategy": "fast", **kwargs})


def test_a_class_whose_value_is_zero_still_asks_for_one_unit():
    """Run-time classes of logs full of 0-second jobs write 0 (LLNL-Atlas-2006);
    the replay asks for at least one unit instead of refusing the request."""
    frame, run, key = make_case([1800.0] * 3, [900.0] * 2)
    run.bins = TargetBins("ramcount", edges=(1500.0, 3000.0), values=(0, 2000, 4000))
    run.predicted["model:x"] = np.zeros(len(frame), dtype=int)
    out = {o.strategy: o for o in replay_target(frame, run, key, ["model:x"], 0.6)}
    assert out["predictor (model:x)"].failed_job_rate > 0  # 1 MB fails every job
