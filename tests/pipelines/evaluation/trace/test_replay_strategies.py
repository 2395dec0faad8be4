"""The trace replay's strategies and the goal summary, on two hand-made tasks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.bins import TargetBins
from panda_predictor.core.replay.engine import ReplayOutcome, ReplayRules
from panda_predictor.core.replay.goals import dominates, replay_goals
from pipelines.evaluation.trace.replay import (
    difference_by_place,
    format_difference,
    format_goals,
    format_replay,
    place_names,
    replay_target,
)
from pipelines.evaluation.trace.target_run import TargetRun

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


def replayed_rows(frame, run, key, models, threshold, **options):
    """Return :func:`replay_target`'s rows by strategy name."""
    replayed = replay_target(frame, run, key, models, threshold, **options)
    return {o.strategy: o for o in replayed.outcomes}


@pytest.fixture
def outcomes() -> dict[str, ReplayOutcome]:
    frame, run, key = make_case([1800.0] * 5, [900.0] * 2)
    return replayed_rows(frame, run, key, ["model:x"], 0.6)


def test_every_strategy_is_replayed_on_the_same_jobs(outcomes):
    assert list(outcomes) == [
        "scouts",
        "predictor (model:x)",
        "rule (baseline:user_last2_mean)",
        "rule (baseline:majority)",
        "request (never re-measured)",
        "request + PanDA re-measurement",
        "oracle",
    ]
    assert {(o.n_jobs, o.n_tasks) for o in outcomes.values()} == {(7, 2)}


def test_scouts_and_predictor_by_hand(outcomes):
    scouts = outcomes["scouts"]
    # A: 3 scouts at 4000, 2 bulk jobs at PanDA's measurement of the scouts:
    # 1800 MB = 1843200 kB, x 110 // 100 = 2027520, / 1024 = 1980. B: 2 scouts.
    assert scouts.wasted_gb_hours == pytest.approx(
        (3 * 2200 + 2 * 180 + 2 * 3100) / GB_H
    )
    assert scouts.mean_bulk_delay_hours == pytest.approx(0.5)
    predictor = outcomes["predictor (model:x)"]
    # A (confident) asks 2000 at once; B keeps its scouts.
    assert predictor.wasted_gb_hours == pytest.approx((5 * 200 + 2 * 3100) / GB_H)
    assert predictor.mean_bulk_delay_hours == 0.0


def test_the_production_row_writes_its_concrete_value():
    frame, run, key = make_case([1800.0] * 5, [900.0] * 2)
    run.values = {"model:x": np.full(7, 1850.0)}  # a value between the classes
    got = replayed_rows(frame, run, key, ["model:x"], 0.6)
    assert got["predictor (model:x)"].wasted_gb_hours == pytest.approx(
        (5 * 50 + 2 * 3100) / GB_H
    )
    # A value above the user's request is capped at it; NaN falls back to the class.
    run.values = {"model:x": np.array([9000.0] + [np.nan] * 6)}
    got = replayed_rows(frame, run, key, ["model:x"], 0.6)
    assert got["predictor (model:x)"].wasted_gb_hours == pytest.approx(
        (2200 + 4 * 200 + 2 * 3100) / GB_H
    )


def test_a_peer_starts_at_once_and_retries_at_its_own_value():
    frame, run, key = make_case([1800.0] * 5, [900.0] * 2)
    peers = {"tovar": (np.full(7, 1700.0), np.full(7, 2500.0))}
    got = replayed_rows(frame, run, key, ["model:x"], 0.6, peers=peers)
    assert list(got)[2] == "peer (tovar)"
    peer = got["peer (tovar)"]
    # A's jobs 0-2 fail at 1700 and retry at max(2500, PanDA's 2000); at job 2,
    # 2/5 files are above the task: the task goes to 2000, jobs 3-4 pass at 2000.
    # B's two jobs ask 1700 and use 900. The three failed 1700 MB hours are
    # wasted whole.
    assert peer.failed_job_rate == pytest.approx(3 / 7)
    spare = 3 * 700 + 2 * 200 + 2 * 800
    assert peer.wasted_gb_hours == pytest.approx((spare + 3 * 1700) / GB_H)
    assert peer.mean_bulk_delay_hours == 0.0
    with pytest.raises(ValueError, match="The peer 'tovar' must give one first"):
        replay_target(
            frame, run, key, [], 0.6, peers={"tovar": (np.ones(3), np.ones(3))}
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
    got = replayed_rows(frame, run, key, ["model:x"], 0.0)
    assert (
        dataclasses.replace(got["predictor (model:x)"], strategy="scouts")
        == (got["scouts"])
    )


def test_panda_re_measures_a_scouted_task_after_5_finished_jobs():
    # Scouts use 1000, 1200, 1100: the bulk asks p75 = 1150 MB -> 1265. Jobs 3
    # (1800) and 4 (1300) fail and get PanDA's 2000 step. After 5 finished jobs
    # PanDA measures 1000..1800: p75 = 1300 MB -> 1430, so jobs 5-6 (1400) pass.
    frame, run, key = make_case(
        [1000.0, 1200.0, 1100.0, 1800.0, 1300.0] + [1400.0] * 2, [900.0]
    )
    scouts = replay_target(frame, run, key, [], 0.6).outcomes[0]
    assert scouts.failed_job_rate == pytest.approx(2 / 8)
    # Wasted: the spare, plus jobs 3 and 4's failed 1265 MB hours whole.
    wasted = (3000 + 2800 + 2900) + 200 + 700 + 2 * 30 + 3100 + 2 * 1265
    assert scouts.wasted_gb_hours == pytest.approx(wasted / GB_H)
    # Without PanDA's re-measurement jobs 5-6 fail at 1265 too: job 5 gets the 2000
    # step, and at job 6 3/7 files are above the task, which is raised to 2000.
    never = ReplayRules(remeasure_after=())
    without = replay_target(frame, run, key, [], 0.6, rules=never).outcomes[0]
    assert without.failed_job_rate == pytest.approx(4 / 8)


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


def test_a_row_that_fails_fewer_and_wastes_less_at_no_more_delay_dominates():
    rows = [
        outcome("scouts", 0.2, 20.0, 1.0),
        outcome("predictor (model:production)", 0.1, 10.0, 0.0),
        outcome("predictor (model:argmax)", 0.0, 1.0, 0.0),  # the product's own
        outcome("oracle", 0.0, 0.0, 0.0),  # no one can run it
        outcome("request (never re-measured)", 0.1, 5.0, 0.0),  # as many failures
        outcome("peer (tovar)", 0.05, 9.0, 0.1),  # more delay
    ]
    goals = replay_goals(rows, "predictor (model:production)")
    assert goals["not_dominated"] and goals["all"] and goals["dominated_by"] == []
    rows.append(outcome("rule (baseline:key_p95)", 0.09, 9.99, 0.0))
    goals = replay_goals(rows, "predictor (model:production)")
    assert not goals["not_dominated"] and not goals["all"]
    assert goals["dominated_by"] == ["rule (baseline:key_p95)"]
    assert goals["failed_jobs"] and goals["waste"] and goals["bulk_delay"]
    line = format_goals("walltime", rows, "predictor (model:production)")
    assert "not dominated fails (dominated by rule (baseline:key_p95))" in line
    # Waste counts in either unit: equal core-hours and more GB-hours is not less.
    mine = ReplayOutcome("m", 10, 2, 0.1, 0.0, 5.0, 1.0, 0.0, 0.0)
    other = ReplayOutcome("o", 10, 2, 0.0, 0.0, 5.0, 2.0, 0.0, 0.0)
    assert not dominates(other, mine) and not dominates(mine, other)
    assert dominates(dataclasses.replace(other, wasted_gb_hours=0.5), mine)


def test_format_replay_marks_the_goals(outcomes):
    table = format_replay("ramcount", list(outcomes.values())).splitlines()
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(outcomes)
    assert rows[0].startswith("| scouts |") and rows[0].endswith("| - |")
    assert rows[1].startswith("| predictor (model:x) |") and rows[1].endswith("✓✓✓✓ |")
    assert rows[2].endswith("✗✓✓✓ |")  # the rule fails more jobs than scouts


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
    out = replayed_rows(frame, run, key, ["model:x"], 0.6)
    assert out["predictor (model:x)"].failed_job_rate > 0  # 1 MB fails every job


def test_a_value_the_decision_wrote_fixed_is_not_re_measured():
    # Task A's first five jobs use 1000 MB, its last two 1900 MB; the model asks
    # 2000 MB at once. After 5 finished jobs PanDA measures 1000 MB -> 1100, so
    # jobs 6-7 fail; written ...Fixed, the 2000 MB stays and no job fails.
    frame, run, key = make_case([1000.0] * 5 + [1900.0] * 2, [900.0])

    def predictor() -> ReplayOutcome:
        return replayed_rows(frame, run, key, ["model:x"], 0.6)["predictor (model:x)"]

    assert predictor().failed_job_rate == pytest.approx(2 / 8)
    run.fixed = {"model:x": np.ones(8, dtype=bool)}
    fixed = predictor()
    assert fixed.failed_job_rate == 0.0
    # A's spare, and task B's one scout at the request (it kept its scouts).
    assert fixed.wasted_gb_hours == pytest.approx((5 * 1000 + 2 * 100 + 3100) / GB_H)


def _applied_case(used_a: list[float], used_b: list[float], written: float | None):
    """make_case with task A skipping its scouts and task B keeping them; the model
    writes ``written`` MB for every job (None: its class's value, 2000)."""
    frame, run, key = make_case(used_a, used_b)
    n_a, n = len(used_a), len(used_a) + len(used_b)
    run.applied = {"model:x": np.array([True] * n_a + [False] * (n - n_a))}
    if written is not None:
        run.values = {"model:x": np.full(n, written)}
    return frame, run, key


def _difference(frame, run, key):
    """Return the difference of model:x and the scouts in the replay of the case."""
    return difference_by_place(
        replay_target(frame, run, key, ["model:x"], 1.0), run, "model:x"
    )


def _rows(groups, kind):
    return {(r.group, r.relation): r for r in groups[kind]}


def test_the_difference_by_place_by_hand():
    frame, run, key = _applied_case([1800.0] * 5, [900.0] * 2, None)
    groups = _difference(frame, run, key)
    place = _rows(groups, "place")
    assert set(place) == {
        ("jobs 1-3", "below"),
        ("jobs 4-5", "below"),
        ("jobs 1-3", "kept scouts"),
    }
    # A's first three jobs: 2000 MB written against the scouts' 4000 (1 h each).
    first = place["jobs 1-3", "below"]
    assert (first.jobs, first.failed, first.scouts_failed) == (3, 0, 0)
    assert first.wasted_hours == pytest.approx(3 * 200 / GB_H)
    assert first.scouts_wasted_hours == pytest.approx(3 * 2200 / GB_H)
    # Jobs 4-5: still the written 2000 against PanDA's measurement of the scouts,
    # 1980 MB: the place where skipping the scouts costs more.
    bulk = place["jobs 4-5", "below"]
    assert bulk.jobs == 2
    assert bulk.wasted_hours == pytest.approx(2 * 200 / GB_H)
    assert bulk.scouts_wasted_hours == pytest.approx(2 * 180 / GB_H)
    kept = place["jobs 1-3", "kept scouts"]
    assert (
        kept.wasted_hours == kept.scouts_wasted_hours == pytest.approx(2 * 3100 / GB_H)
    )
    size = _rows(groups, "size")
    assert set(size) == {
        ("tasks of 4-5 jobs", "below"),
        ("tasks of 2-3 jobs", "kept scouts"),
    }
    assert size["tasks of 4-5 jobs", "below"].jobs == 5
    # Each grouping counts every job once and sums to the replay's own row.
    row = replayed_rows(frame, run, key, ["model:x"], 1.0)["predictor (model:x)"]
    for kind in ("place", "size"):
        assert sum(r.jobs for r in groups[kind]) == row.n_jobs == 7
        assert sum(r.wasted_hours for r in groups[kind]) == pytest.approx(
            row.wasted_gb_hours
        )


def test_writing_the_request_costs_the_jobs_before_the_re_measurement():
    # The model writes the request itself: the first jobs cost what the scouts
    # cost, jobs 4-5 hold the request instead of PanDA's measurement of the scouts.
    frame, run, key = _applied_case([1800.0] * 5, [900.0] * 2, 4000.0)
    place = _rows(_difference(frame, run, key), "place")
    first = place["jobs 1-3", "same"]
    assert first.wasted_hours == pytest.approx(first.scouts_wasted_hours)
    bulk = place["jobs 4-5", "same"]
    assert bulk.wasted_hours - bulk.scouts_wasted_hours == pytest.approx(
        2 * (4000 - 1980) / GB_H
    )


def test_a_first_value_too_small_fails_where_the_scouts_do_not():
    frame, run, key = _applied_case([2500.0], [900.0] * 2, None)
    groups = _difference(frame, run, key)
    first = _rows(groups, "place")["jobs 1-3", "below"]
    assert (first.jobs, first.failed, first.scouts_failed) == (1, 1, 0)
    assert _rows(groups, "size")["tasks of 1 job", "below"].failed == 1
    text = format_difference("ramcount", "model:x", groups)
    assert "| jobs 1-3 | below | 1 | 1 / 0 | +1 |" in text
    assert "extra wasted GB-h" in text


@pytest.mark.parametrize(
    ("threshold", "applied", "fixed"),
    [(0.6, False, False), (1.0, True, False), (1.0, True, True)],
    ids=["confidence", "applied-flags", "written-fixed"],
)
def test_the_per_job_figures_sum_to_the_replay_rows(threshold, applied, fixed):
    """The breakdown splits the rows the table shows: the scouts' and the
    predictor's figures per job sum to their rows, and those rows are the ones the
    replay's own aggregate path gives for the same decision."""
    # Task A (confident, skips its scouts): PanDA's re-measurement at 5 fails jobs
    # 6-7, job 8 uses more than the request and is lost. Task B keeps its scouts:
    # its bulk waits for them and fails at PanDA's measurement of them.
    used_a, used_b = [1000.0] * 5 + [1900.0] * 2 + [4500.0], [900.0] * 3 + [3000.0]
    frame, run, key = make_case(used_a, used_b)
    frame["run_s"] = [600.0 * (1 + i % 4) for i in range(len(frame))]
    n_a, n = len(used_a), len(frame)
    decided = np.arange(n) < n_a
    if applied:
        run.applied = {"model:x": decided}
    if fixed:
        run.fixed = {"model:x": np.ones(n, dtype=bool)}
    replayed = replay_target(frame, run, key, ["model:x"], threshold)
    rows = {o.strategy: o for o in replayed.outcomes}
    assert list(replayed.by_job) == ["scouts", "predictor (model:x)"]
    assert list(replayed.applied["model:x"]) == list(decided)
    jobs = replayed.jobs
    again = {
        "scouts": jobs.scouts(),
        "predictor (model:x)": jobs.started_at_once(
            "predictor (model:x)", np.full(n, 2000.0), decided, remeasure=not fixed
        ),
    }
    for name, per_job in replayed.by_job.items():
        row = rows[name]
        assert row == again[name]
        assert (row.n_jobs, row.n_tasks) == (per_job.failed.size, 2) == (n, 2)
        assert row.failed_job_rate == pytest.approx(per_job.failed.sum() / n)
        assert row.lost_job_rate == pytest.approx(per_job.lost.sum() / n)
        assert row.wasted_gb_hours == pytest.approx(per_job.wasted_hours.sum())
        assert row.lost_core_hours == pytest.approx(per_job.lost_core_hours.sum())
        assert row.lost_gb_hours == pytest.approx(per_job.lost_gb_hours.sum())
        assert row.mean_retry_delay_hours == pytest.approx(
            per_job.lost_s.sum() / n / 3600
        )
        assert row.mean_bulk_delay_hours == pytest.approx(
            per_job.task_bulk_delay_s.sum() / 2 / 3600
        )
    # The case is worth checking: both rows fail, lose and wait somewhere.
    scouts, mine = rows["scouts"], rows["predictor (model:x)"]
    assert scouts.mean_bulk_delay_hours > 0 and scouts.lost_job_rate > 0
    assert mine.failed_job_rate > 0 and mine != dataclasses.replace(
        scouts, strategy=mine.strategy
    )


def test_the_difference_needs_a_replayed_model():
    frame, run, key = _applied_case([1800.0] * 5, [900.0] * 2, None)
    replayed = replay_target(frame, run, key, [], 1.0)
    with pytest.raises(ValueError, match="The 'model' field must name a replayed"):
        difference_by_place(replayed, run, "model:x")


def test_place_names_follow_the_rules():
    assert place_names(ReplayRules()) == ("jobs 1-3", "jobs 4-5", "jobs 6+")
    assert place_names(ReplayRules(n_scouts=1)) == ("job 1", "jobs 2-5", "jobs 6+")
    assert place_names(ReplayRules(remeasure_after=())) == ("jobs 1-3", "jobs 4+")
