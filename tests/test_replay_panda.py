"""PanDA's memory retries and the re-estimates, on cases small enough to do by hand."""

from __future__ import annotations

import pytest

from panda_predictor.core.replay import ReplayRules, replay
from panda_predictor.core.replay_panda import PANDA_RAM_STEPS_MB, panda_memory_retry

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


def test_the_ladder_is_pandas():
    assert PANDA_RAM_STEPS_MB == (1000, 2000, 3000, 4000, 6000, 8000)


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
    out = replay("s", "memory", [0], [4500], [3600], [1], [1500], [1500])
    # 1500 -> 2000 -> 3000 -> 4000 -> 6000: four failed attempts of an hour each.
    assert out.retries_per_job == 4 and out.lost_job_rate == 0.0
    assert out.lost_core_hours == pytest.approx(4.0)
    assert out.lost_gb_hours == pytest.approx((1500 + 2000 + 3000 + 4000) / 1024)
    assert out.wasted_gb_hours == pytest.approx((6000 - 4500) / 1024)


def test_a_job_above_the_top_step_is_lost():
    out = replay("s", "memory", [0, 0], [9000, 100], [60, 60], [1, 1], [8000] * 2, [1])
    assert out.failed_job_rate == 0.5 and out.lost_job_rate == 0.5
    assert out.retries_per_job == 0.0
    assert out.lost_core_hours == pytest.approx(60 / 3600)
    # The lost job wastes nothing; the other one wastes 7900 MB for a minute.
    assert out.wasted_gb_hours == pytest.approx(7900 * 60 / 1024 / 3600)


def test_the_task_wide_raise_spares_the_rest_of_the_task():
    # Ten jobs asking 2000 use 2500 each. Jobs 0-3 are raised to 3000 one by one;
    # at job 4, 4/10 files are above the task: the task goes to 3000 and jobs 5-9
    # run at once.
    args = ("s", "memory", [0] * 10, [2500] * 10, [60] * 10, [1] * 10, [2000] * 10)
    out = replay(*args, [2000])
    assert out.failed_job_rate == 0.5 and out.retries_per_job == 0.5
    fixed = replay(*args, [2000], rules=ReplayRules(fixed_unit=True))
    assert fixed.failed_job_rate == 1.0


def test_refine_raises_the_rest_of_the_task_after_k_jobs():
    # Time: predicted 10 s, used 12, 15, 11, 14, 16. Jobs 0-2 fail and retry at 20
    # (one class up); then the rest asks for max(12, 15, 11) * 1.1 = 16.5.
    args = ("s", "time", [0] * 5, [12, 15, 11, 14, 16], [1] * 5, [1] * 5, [10] * 5)
    ladder = [10, 20, 40]
    out = replay(*args, ladder, reestimate_after=[3] * 5, reestimate_floor=[0.5] * 5)
    assert out.failed_job_rate == pytest.approx(0.6)
    wasted = (20 - 12) + (20 - 15) + (20 - 11) + (16.5 - 14) + (16.5 - 16)
    assert out.wasted_core_hours == pytest.approx(wasted / 3600)
    assert replay(*args, ladder).failed_job_rate == 1.0


def test_refine_lowers_but_never_below_its_floor():
    # Predicted 40, used at most 6: the estimate 6.6 is floored at 0.5 x 40 = 20.
    args = ("s", "time", [0] * 5, [5, 6, 4, 5, 5], [1] * 5, [1] * 5, [40] * 5)
    out = replay(
        *args, [10, 20, 40], reestimate_after=[3] * 5, reestimate_floor=[0.5] * 5
    )
    assert out.wasted_core_hours == pytest.approx((3 * 40 + 2 * 20 - 25) / 3600)
    capped = replay(*args, [10, 20, 40], reestimate_after=[3] * 5, cap=[8] * 5)
    assert capped.wasted_core_hours == pytest.approx((3 * 40 + 2 * 6.6 - 25) / 3600)


def test_the_second_look_resizes_later_jobs_from_all_finished_ones():
    # Six jobs asking 50; after 4 finished, the rest asks max(1, 2, 8, 3) * 1.1.
    args = ("s", "time", [0] * 6, [1, 2, 8, 3, 5, 4], [1] * 6, [1] * 6, [50] * 6)
    out = replay(*args, [50], reestimate_after=[4] * 6)
    assert out.failed_job_rate == 0.0
    expected = 4 * 50 + 2 * 8.8 - sum([1, 2, 8, 3, 5, 4])
    assert out.wasted_core_hours == pytest.approx(expected / 3600)


def test_a_look_drops_an_earlier_task_wide_raise():
    # Job 0 is raised to 3000; at job 1, 1/3 files are above the task: the task
    # goes to 3000. PanDA's measurement then overwrites the task's ramCount: after
    # 2 finished jobs the last job asks 2500 * 1.1 = 2750, not 3000.
    args = ("s", "memory", [0] * 3, [2500, 2500, 100], [60] * 3, [1] * 3, [2000] * 3)
    out = replay(*args, [2000], reestimate_after=[2] * 3)
    assert out.wasted_gb_hours == pytest.approx((500 + 500 + 2650) * 60 / 1024 / 3600)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"memory_retry": "double"}, "'memory_retry' field must be one of"),
        ({"memory_steps": (2000.0, 1000.0)}, "'memory_steps' field must be positive"),
        ({"memory_steps": ()}, "'memory_steps' field must be positive"),
        ({"task_raise_fraction": 1.5}, "'task_raise_fraction' field must be in"),
        ({"refine_floor": -0.1}, "'refine_floor' field must be in"),
        ({"margin": -1.0}, "'margin' field must be in"),
        ({"n_scouts": 0}, "'n_scouts' field must be an integer >= 1"),
        ({"second_look_jobs": 2.5}, "'second_look_jobs' field must be an integer"),
        ({"refine_jobs": 0}, "'refine_jobs' field must be an integer >= 1"),
    ],
    ids=[
        "unknown-retry",
        "descending-steps",
        "no-steps",
        "fraction-above-one",
        "negative-floor",
        "negative-margin",
        "no-scouts",
        "fractional-look",
        "refine-after-none",
    ],
)
def test_replay_rules_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ReplayRules(**kwargs)
