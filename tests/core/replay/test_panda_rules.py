"""PanDA's retries, maxAttempt and re-measurements, on cases done by hand."""

from __future__ import annotations

import pytest

from panda_predictor.core.replay.engine import ReplayCase, ReplayRules, replay
from panda_predictor.core.replay.panda_rules import (
    panda_measurement,
    panda_memory_retry,
)

RULES = ReplayRules()


@pytest.mark.parametrize(
    ("request_mb", "expected"),
    [
        (500.0, 1000.0),
        (1000.0, 2000.0),
        (2500.0, 3000.0),
        (4000.0, 6000.0),
        (6000.0, 8000.0),
        (8000.0, 0.0),  # the top: nothing more
        (9000.0, 0.0),
    ],
    ids=[
        "below-first",
        "on-a-step",
        "between",
        "4000-6000",
        "6000-8000",
        "top",
        "above",
    ],
)
def test_a_failed_job_gets_the_next_step_strictly_above_its_request(
    request_mb, expected
):
    # Ten files, none raised yet: far below the 30 % task-wide threshold.
    file_ram, task_ram = panda_memory_retry(0, request_mb, 500.0, [0.0] * 10, RULES)
    assert (file_ram, task_ram) == (expected, 500.0)


def test_more_than_30_percent_raised_files_raise_the_task():
    # 4 of 10 files already at 3000 above the task's 2000: the task goes to the
    # step above max(2000, 3000 - 1) = 3000; the job's own files stay as they are.
    file_ram = [3000.0] * 4 + [0.0] * 6
    assert panda_memory_retry(5, 2000.0, 2000.0, file_ram, RULES) == (0.0, 3000.0)
    # Exactly 30 % is not more than 30 %: the job's files are raised instead.
    file_ram = [3000.0] * 3 + [0.0] * 7
    assert panda_memory_retry(5, 2000.0, 2000.0, file_ram, RULES) == (3000.0, 2000.0)
    # MBPerCoreFixed tasks are never raised as a whole.
    fixed = ReplayRules(fixed_unit=True)
    assert panda_memory_retry(5, 2000.0, 2000.0, [3000.0] * 9 + [0.0], fixed) == (
        3000.0,
        2000.0,
    )


def test_one_job_climbs_the_steps_and_every_attempt_is_lost():
    five = ReplayRules(max_attempts=5)
    out = replay(
        "s", ReplayCase("memory", [0], [4500], [3600], [1], [1500], [1500], rules=five)
    )
    # 1500 -> 2000 -> 3000 -> 4000 -> 6000: four failed attempts of an hour each.
    assert out.retries_per_job == 4 and out.lost_job_rate == 0.0
    assert out.lost_core_hours == pytest.approx(4.0)
    assert out.lost_gb_hours == pytest.approx((1500 + 2000 + 3000 + 4000) / 1024)
    # Wasted: 6000's spare, plus the four failed attempts whole.
    spare, lost = 6000 - 4500, 1500 + 2000 + 3000 + 4000
    assert out.wasted_gb_hours == pytest.approx((spare + lost) / 1024)


def test_max_attempt_loses_a_job_after_its_last_failed_attempt():
    # JEDI's default maxAttempt is 3: 1500, 2000 and 3000 fail, the job is lost.
    out = replay("s", ReplayCase("memory", [0], [4500], [3600], [1], [1500], [1500]))
    assert out.lost_job_rate == 1.0 and out.retries_per_job == 2
    assert out.lost_core_hours == pytest.approx(3.0)
    assert out.lost_gb_hours == pytest.approx((1500 + 2000 + 3000) / 1024)
    # A lost job has no spare; all it held in its failed attempts is wasted.
    assert out.wasted_gb_hours == pytest.approx(out.lost_gb_hours)
    # Time: 10 -> 20 -> 40 s fail; with 6 attempts 80 and 160 fail, 320 passes.
    args = ("time", [0], [300], [300], [1], [10], [10, 20, 40])
    assert replay("s", ReplayCase(*args)).lost_core_hours == pytest.approx(
        (10 + 20 + 40) / 3600
    )
    six = replay("s", ReplayCase(*args, rules=ReplayRules(max_attempts=6)))
    assert six.lost_job_rate == 0.0 and six.retries_per_job == 5
    lost_s = 10 + 20 + 40 + 80 + 160
    assert six.wasted_core_hours == pytest.approx((320 - 300 + lost_s) / 3600)


def test_a_job_above_the_top_step_fails_until_its_max_attempt():
    out = replay(
        "s",
        ReplayCase("memory", [0, 0], [9000, 100], [60, 60], [1, 1], [8000] * 2, [1]),
    )
    # PanDA has nothing above 8000: the job is retried as it is, 3 attempts lost.
    assert out.failed_job_rate == 0.5 and out.lost_job_rate == 0.5
    assert out.retries_per_job == pytest.approx(2 / 2)
    assert out.lost_core_hours == pytest.approx(3 * 60 / 3600)
    # The lost job wastes its three 8000 MB minutes; the other one 7900 MB for
    # a minute.
    assert out.wasted_gb_hours == pytest.approx((3 * 8000 + 7900) * 60 / 1024 / 3600)


def test_the_task_wide_raise_spares_the_rest_of_the_task():
    # Ten jobs asking 2000 use 2500 each. Jobs 0-3 are raised to 3000 one by one;
    # at job 4, 4/10 files are above the task: the task goes to 3000 and jobs 5-9
    # run at once.
    args = ("memory", [0] * 10, [2500] * 10, [60] * 10, [1] * 10, [2000] * 10)
    out = replay("s", ReplayCase(*args, [2000]))
    assert out.failed_job_rate == 0.5 and out.retries_per_job == 0.5
    fixed = replay("s", ReplayCase(*args, [2000], rules=ReplayRules(fixed_unit=True)))
    assert fixed.failed_job_rate == 1.0


def test_a_retry_asks_at_least_the_strategys_retry_request():
    # Time: 10 s fails; PanDA's rule says 20 (which would fail too), the
    # strategy's retry request says 35: one failed attempt (10 s wasted), no
    # spare.
    args = ("time", [0], [35], [35], [1], [10], [10, 20, 40])
    assert (
        replay("s", ReplayCase(*args)).retries_per_job == 2
    )  # 10 and 20 fail, 40 passes
    out = replay("s", ReplayCase(*args, retry_request=[35]))
    assert out.retries_per_job == 1
    assert out.wasted_core_hours == pytest.approx(10 / 3600)
    # A retry request below PanDA's rule changes nothing: max(5, 20) = 20.
    assert replay("s", ReplayCase(*args, retry_request=[5])) == replay(
        "s", ReplayCase(*args)
    )
    # Memory: 1500 fails, PanDA's step is 2000, the strategy's 5000.
    mem = replay(
        "s",
        ReplayCase(
            "memory", [0], [4500], [3600], [1], [1500], [1], retry_request=[5000]
        ),
    )
    assert mem.retries_per_job == 1 and mem.lost_job_rate == 0.0
    assert mem.wasted_gb_hours == pytest.approx((500 + 1500) / 1024)


def memory_task() -> dict[str, list[float]]:
    """Return 110 one-hour one-core jobs of a task that asks 3000 MB per core."""
    used = [1000.0, 1100.0, 1200.0, 1300.0, 1400.0] + [1400.0] * 95 + [1520.0] * 10
    used[10] = 1500.0
    used[105] = 1600.0
    n = len(used)
    return {
        "task": [0] * n,
        "used": used,
        "run_s": [3600.0] * n,
        "cores": [1.0] * n,
        "requested": [3000.0] * n,
    }


def test_panda_re_measures_memory_after_5_and_after_100_finished_jobs():
    """The hand-worked task of issue 20, memory (MB per core, one-hour jobs).

    Jobs 0-4 ask 3000 and use 1000..1400: they waste 2000+1900+1800+1700+1600 =
    9000 MB-h. After 5 finished jobs PanDA measures them: per job kB 1024000,
    1126400, 1228800, 1331200, 1433600; the 75th percentile (k = 4 x 0.75 = 3) is
    1331200 kB; x 110 // 100 = 1464320; / 1024 = 1430 MB. Jobs 5-99 ask 1430: 94
    use 1400 (waste 30 each: 2820), job 10 uses 1500 and fails (an hour at 1430
    MB lost); no file was raised, so PanDA gives its file the next step, 2000,
    where it passes (waste 500). After 100 finished jobs (1000..1300, 95 x 1400,
    1500) the 75th percentile (k = 99 x 0.75 = 74.25, between two 1400s) is 1400
    MB = 1433600 kB; x 110 // 100 = 1576960; / 1024 = 1540 MB. Jobs 100-109 ask
    1540: 9 use 1520 (waste 20 each: 180), job 105 uses 1600 and fails (an hour at
    1540 lost); 1 of 110 files is raised, not over 30 %: its file gets 2000 (waste
    400). Failed jobs 2/110; lost 1430 + 1540 = 2970 MB-h; wasted, the spare
    9000 + 3320 + 580 = 12900 MB-h plus the lost 2970, 15870 MB-h.
    """
    out = replay(
        "s", ReplayCase("memory", ladder=[3000.0], remeasure=True, **memory_task())
    )
    assert out.failed_job_rate == pytest.approx(2 / 110)
    assert out.lost_job_rate == 0.0
    assert out.wasted_gb_hours == pytest.approx(15870 / 1024)
    assert out.lost_gb_hours == pytest.approx(2970 / 1024)
    assert out.lost_core_hours == pytest.approx(2.0)
    # Never re-measured, every job keeps 3000: no failure, much more waste.
    kept = replay("s", ReplayCase("memory", ladder=[3000.0], **memory_task()))
    assert kept.failed_job_rate == 0.0
    assert kept.wasted_gb_hours == pytest.approx(
        sum(3000 - u for u in memory_task()["used"]) / 1024
    )
    # An MBPerCoreFixed task is never re-measured.
    fixed = ReplayRules(fixed_unit=True)
    assert replay(
        "s",
        ReplayCase(
            "memory", ladder=[3000.0], remeasure=True, rules=fixed, **memory_task()
        ),
    ) == replay(
        "s", ReplayCase("memory", ladder=[3000.0], rules=fixed, **memory_task())
    )


def test_panda_re_measures_time_after_5_and_after_100_finished_jobs():
    """The hand-worked task of issue 20, run time (s, one core), ladder 50/100/200.

    Jobs 0-4 ask 100 s and run 10..50: they waste 90+80+70+60+50 = 350 s. After 5
    finished jobs PanDA's cpuTime rule takes the 95th percentile (k = 4 x 0.95 =
    3.8: 40 + 0.8 x 10 = 48) x 1.5 = 72 s. Jobs 5-99 ask 72: 94 run 60 (waste 12
    each: 1128), job 10 runs 80 and fails (72 s lost), retried one class up at 100
    (waste 20). After 100 finished jobs (10..50, 94 x 60, 80) the 95th percentile
    (k = 99 x 0.95 = 94.05, between two 60s) is 60: 60 x 1.5 = 90 s. Jobs 100-109
    ask 90: 9 run 70 (waste 20 each: 180), job 105 runs 95 and fails (90 s lost),
    retried at 100 (waste 5). Failed jobs 2/110; lost 72 + 90 = 162 core-s;
    wasted, the spare 350 + 1148 + 185 = 1683 core-s plus the lost 162, 1845.
    """
    used = [10.0, 20.0, 30.0, 40.0, 50.0] + [60.0] * 95 + [70.0] * 10
    used[10], used[105] = 80.0, 95.0
    n = len(used)
    args = {
        "task": [0] * n,
        "used": used,
        "run_s": used,
        "cores": [1.0] * n,
        "requested": [100.0] * n,
        "ladder": [50.0, 100.0, 200.0],
    }
    out = replay("s", ReplayCase("time", remeasure=True, **args))
    assert out.failed_job_rate == pytest.approx(2 / 110)
    assert out.wasted_core_hours == pytest.approx(1845 / 3600)
    assert out.lost_core_hours == pytest.approx(162 / 3600)
    # PanDA's task walltime rule (max x 1.5) instead: 75 s after 5 jobs (job 10
    # fails at 75, retried at 100), 120 s after 100 (job 105 passes).
    wall = replay(
        "s",
        ReplayCase(
            "time", remeasure=True, rules=ReplayRules(time_rule="walltime"), **args
        ),
    )
    assert wall.failed_job_rate == pytest.approx(1 / 110)
    expected = 350 + (94 * 15 + 20) + (9 * 50 + 25) + 75  # + the failed 75 s
    assert wall.wasted_core_hours == pytest.approx(expected / 3600)


def test_the_scouts_measurement_then_the_re_measurements():
    # Three scouts at 3000 (1000, 1100, 1200): the bulk asks p75 = 1150 MB ->
    # 1177600 kB x 110 // 100 / 1024 = 1265. Jobs 3-4 use 1250 (waste 15 each);
    # at 5 finished PanDA measures 1000..1250: p75 = 1250 MB -> 1375 MB; job 5
    # uses 1300 (waste 75).
    args = ("memory", [0] * 6, [1000, 1100, 1200, 1250, 1250, 1300])
    rest = ([3600] * 6, [1] * 6, [3000] * 6, [3000])
    out = replay("s", ReplayCase(*args, *rest, scouts=3, remeasure=True))
    assert out.failed_job_rate == 0.0
    assert out.wasted_gb_hours == pytest.approx((2000 + 1900 + 1800 + 30 + 75) / 1024)
    # The measurement is capped at the user's request.
    capped = replay(
        "s", ReplayCase(*args, *rest, scouts=3, remeasure=True, cap=[1200] * 6)
    )
    assert capped.failed_job_rate == pytest.approx(3 / 6)


def test_a_measurement_drops_an_earlier_task_wide_raise():
    # Job 0 is raised to 3000; at job 1, 1/3 files are above the task: the task
    # goes to 3000. PanDA's measurement then overwrites the task's ramCount: after
    # 2 finished jobs the last job asks p75(2500, 2500) = 2500 MB -> 2750, not 3000.
    # Wasted: the spare 500 + 500 + 2650 MB-min, plus jobs 0 and 1's failed
    # 2000 MB minutes.
    args = ("memory", [0] * 3, [2500, 2500, 100], [60] * 3, [1] * 3, [2000] * 3)
    rules = ReplayRules(remeasure_after=(2,))
    out = replay("s", ReplayCase(*args, [2000], remeasure=True, rules=rules))
    wasted_mb = 500 + 500 + 2650 + 2 * 2000
    assert out.wasted_gb_hours == pytest.approx(wasted_mb * 60 / 1024 / 3600)


def test_pandas_measurement_formulas():
    # Memory rounds down: p75 of 1000 MB is 1024000 kB; x 1.1 = 1126400 kB;
    # / 1024 = 1100 MB exactly; 1000.5 MB -> 1024512 kB -> 1126963 -> 1100.5 -> 1100.
    assert panda_measurement("memory", [1000.0]) == 1100.0
    assert panda_measurement("memory", [1000.5]) == 1100.0
    assert panda_measurement("memory", [0.0]) == 1.0  # the replay asks at least 1
    # Time: 95th percentile x 1.5, rounded up; or the maximum x 1.5.
    assert panda_measurement("time", [10.0, 20.0]) == 30.0  # 19.5 x 1.5 = 29.25
    assert panda_measurement("time", [10.0, 20.0], "walltime") == 30.0
    assert panda_measurement("time", [10.0, 30.0, 11.0], "walltime") == 45.0


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("disk", [1.0]), "'resource' field must be 'time' or 'memory'"),
        (("time", []), "'finished_uses' field must hold at least one"),
        (("time", [1.0], "median"), "'time_rule' field must be one of"),
    ],
    ids=["bad-resource", "no-jobs", "bad-time-rule"],
)
def test_panda_measurement_errors(args, match):
    with pytest.raises(ValueError, match=match):
        panda_measurement(*args)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"memory_retry": "double"}, "'memory_retry' field must be one of"),
        ({"memory_steps": (2000.0, 1000.0)}, "'memory_steps' field must be positive"),
        ({"memory_steps": ()}, "'memory_steps' field must be positive"),
        ({"task_raise_fraction": 1.5}, "'task_raise_fraction' field must be in"),
        ({"n_scouts": 0}, "'n_scouts' field must be an integer >= 1"),
        ({"max_attempts": 0}, "'max_attempts' field must be an integer >= 1"),
        ({"remeasure_after": [5, 100]}, "'remeasure_after' field must be a tuple"),
        ({"remeasure_after": (100, 5)}, "'remeasure_after' field must be a tuple"),
        ({"remeasure_after": (0,)}, "'remeasure_after' field must be a tuple"),
        ({"time_rule": "max"}, "'time_rule' field must be one of"),
    ],
    ids=[
        "unknown-retry",
        "descending-steps",
        "no-steps",
        "fraction-above-one",
        "no-scouts",
        "no-attempts",
        "points-not-a-tuple",
        "points-descending",
        "point-zero",
        "unknown-time-rule",
    ],
)
def test_replay_rules_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ReplayRules(**kwargs)
