"""The cost-of-scouts replay on tiny handwritten cases."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from panda_predictor.core.replay.engine import (
    ReplayCase,
    ReplayJobs,
    ReplayRules,
    next_class_up,
    replay,
)

LADDER = [10.0, 20.0, 40.0]


def test_time_replay_fails_retries_one_class_up_and_counts_waste():
    out = replay(
        "s",
        ReplayCase(
            "time",
            task=[0, 0],
            used=[15, 5],
            run_s=[15, 5],
            cores=[2, 1],
            requested=[10, 10],
            ladder=LADDER,
            bulk_delay_s=[0, 3600],
        ),
    )
    assert out.failed_job_rate == 0.5
    assert out.lost_core_hours == pytest.approx(20 / 3600)  # 10 s x 2 cores
    # Wasted: the spare seconds of both jobs, plus the failed attempt whole.
    assert out.wasted_core_hours == pytest.approx((5 * 2 + 5 * 1 + 10 * 2) / 3600)
    assert out.mean_bulk_delay_hours == pytest.approx(1.0)
    assert out.mean_retry_delay_hours == pytest.approx(10 / 2 / 3600)


def test_memory_replay_wastes_gb_hours_and_loses_whole_runs():
    out = replay(
        "s",
        ReplayCase(
            "memory",
            task=[0, 1],
            used=[1024, 3000],
            run_s=[3600, 7200],
            cores=[1, 2],
            requested=[2048, 2048],
            ladder=[2048, 4096],
            rules=ReplayRules(memory_retry="ladder"),
        ),
    )
    assert out.failed_job_rate == 0.5
    assert out.lost_core_hours == pytest.approx(4.0)  # 7200 s x 2 cores
    spare = (1024 * 1 * 3600 + (4096 - 3000) * 2 * 7200) / 1024 / 3600
    lost = 2048 * 2 * 7200 / 1024 / 3600  # the failed attempt held 2048 MB x 2
    assert out.wasted_gb_hours == pytest.approx(spare + lost)
    assert out.n_tasks == 2
    assert out.lost_gb_hours == pytest.approx(lost)
    assert out.retries_per_job == 0.5 and out.lost_job_rate == 0.0


def test_memory_replay_retries_on_pandas_steps_by_default():
    # 2048 -> 3000 (PanDA's next step), not 4096 (the next class).
    out = replay(
        "s",
        ReplayCase(
            "memory",
            task=[0, 1],
            used=[1024, 3000],
            run_s=[3600, 7200],
            cores=[1, 2],
            requested=[2048, 2048],
            ladder=[2048, 4096],
        ),
    )
    assert out.failed_job_rate == 0.5
    # Job 0 spares 1024 MB for an hour; job 1's failed 2048 MB x 2 cores x 2 h
    # attempt is wasted whole, and its 3000 MB retry fits exactly.
    wasted_mb_s = 1024 * 3600 + 2048 * 2 * 7200
    assert out.wasted_gb_hours == pytest.approx(wasted_mb_s / 1024 / 3600)


def test_above_the_top_class_the_request_doubles():
    assert list(next_class_up(np.array([5.0, 10.0, 40.0]), np.array(LADDER))) == [
        10.0,
        20.0,
        80.0,
    ]
    out = replay("s", ReplayCase("time", [0], [100], [100], [1], [40], LADDER))
    assert out.lost_core_hours == pytest.approx((40 + 80) / 3600)


def test_the_scouts_row_asks_for_pandas_measurement_of_the_scouts():
    # Task 0: 2 scouts at the request 5000 use 1000 and 1200; the bulk asks
    # p75(1024000, 1228800 kB) = 1177600 kB, x 110 // 100 = 1295360, / 1024 =
    # 1265 MB (PanDA rounds down). Task 1 has one job: a scout, nothing after it.
    out = replay(
        "scouts",
        ReplayCase(
            "memory",
            task=[0, 0, 0, 0, 1],
            used=[1000, 1200, 1100, 1250, 900],
            run_s=[3600] * 5,
            cores=[1] * 5,
            requested=[5000] * 5,
            ladder=[5000],
            scouts=2,
        ),
    )
    assert out.failed_job_rate == 0.0
    wasted_mb = (5000 - 1000) + (5000 - 1200) + (1265 - 1100) + (1265 - 1250) + 4100
    assert out.wasted_gb_hours == pytest.approx(wasted_mb / 1024)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"resource": "disk"}, "'resource' field must be 'time' or 'memory'"),
        ({"used": [1, 2]}, "one length"),
        ({"requested": [0]}, "'requested' field must hold positive"),
        ({"cores": [-1]}, "'cores' field must hold finite numbers >= 0"),
        ({"scouts": [1.5]}, "'scouts' field must hold whole"),
        ({"scouts": [-1]}, "'scouts' field must hold finite"),
        ({"cap": [0]}, "'cap' field must hold positive"),
        ({"retry_request": [np.nan]}, "'retry_request' field must hold finite"),
    ],
    ids=[
        "bad-resource",
        "length-mismatch",
        "zero-request",
        "negative-cores",
        "fractional-scouts",
        "negative-scouts",
        "zero-cap",
        "nan-retry",
    ],
)
def test_replay_errors(kwargs, match):
    args = {
        "resource": "time",
        "task": [0],
        "used": [1],
        "run_s": [1],
        "cores": [1],
        "requested": [1],
        "ladder": LADDER,
    }
    with pytest.raises(ValueError, match=match):
        replay("s", ReplayCase(**{**args, **kwargs}))


# --- ReplayJobs: the rows every replay shares ----------------------------------

#: One burst of six jobs that each run 100 s on one core; the user asked for 400.
SIX = dict(
    resource="time",
    task=np.zeros(6, dtype=int),
    used=np.full(6, 100.0),
    run_s=np.full(6, 100.0),
    cores=np.ones(6),
    ladder=np.array([50.0, 200.0, 400.0]),
    request=np.full(6, 400.0),
)


def test_scouts_row_by_hand():
    # Three scouts at the request (300 s spare each); PanDA measures them:
    # ceil(p95(100, 100, 100) x 1.5) = 150 s for jobs 4 and 5, and again after
    # 5 finished jobs for job 6 (50 s spare each); the bulk waits 100 s.
    jobs = ReplayJobs(**SIX)
    out = jobs.scouts()
    assert out.failed_job_rate == 0.0
    assert out.wasted_core_hours == pytest.approx((3 * 300 + 3 * 50) / 3600)
    assert out.mean_bulk_delay_hours == pytest.approx(100 / 3600)
    by_job = jobs.by_job()
    assert by_job.wasted_hours == pytest.approx(
        np.array([300, 300, 300, 50, 50, 50]) / 3600
    )
    assert by_job.wasted_hours.sum() == pytest.approx(out.wasted_core_hours)


def test_started_at_once_row_by_hand():
    jobs = ReplayJobs(**SIX)
    # 120 s for the first five jobs (20 s spare), then PanDA's 150 s.
    out = jobs.started_at_once("p", np.full(6, 120.0))
    assert (out.failed_job_rate, out.mean_bulk_delay_hours) == (0.0, 0.0)
    assert out.wasted_core_hours == pytest.approx((5 * 20 + 50) / 3600)
    # 90 s fails each of the five first jobs once; the retry goes one class up
    # (200 s, 100 s spare); job 6 asks for PanDA's 150 s.
    low = jobs.by_job(np.full(6, 90.0))
    assert low.failed.tolist() == [True] * 5 + [False]
    assert low.lost_s == pytest.approx([90.0] * 5 + [0.0])
    # Wasted: the retry's spare plus the failed 90 s attempt.
    assert low.wasted_hours == pytest.approx(np.array([190] * 5 + [50]) / 3600)
    # Above the request the value is capped at it; a task that keeps its scouts
    # (its first job decides) runs exactly as the scouts' row.
    capped = jobs.started_at_once("p", np.full(6, 900.0), remeasure=False)
    assert capped.wasted_core_hours == pytest.approx(6 * 300 / 3600)
    kept = jobs.started_at_once("p", np.full(6, 120.0), [False] + [True] * 5)
    assert kept == replace(jobs.scouts(), strategy="p")


def test_without_a_request_the_scouts_ask_for_the_top_class():
    jobs = ReplayJobs(**{**SIX, "request": np.full(6, np.nan)})
    assert jobs.default.tolist() == [400.0] * 6
    assert np.isinf(jobs.cap).all()
    assert jobs.exact().wasted_core_hours == 0.0


def test_a_time_retry_stops_at_the_request_until_the_request_failed():
    # 90 s fails a 100 s job; one class up would be 200 s, but the user asked
    # for 120 s and the job never runs past it: the retry asks for 120 s.
    jobs = ReplayJobs(**{**SIX, "request": np.full(6, 120.0)})
    low = jobs.by_job(np.full(6, 90.0))
    assert low.failed.tolist() == [True] * 5 + [False]
    assert low.wasted_hours[:5] == pytest.approx(np.full(5, (20 + 90) / 3600))
    # A job above its request (the log says it ran longer) fails at the request
    # too, and only then goes one class up.
    over = replay(
        "x",
        ReplayCase(
            "time",
            task=[0],
            used=[150.0],
            run_s=[150.0],
            cores=[1.0],
            requested=[90.0],
            ladder=[50.0, 200.0, 400.0],
            cap=[120.0],
        ),
    )
    assert over.retries_per_job == 2.0
    # 200 s spares 50; the failed 90 s and 120 s attempts are wasted whole.
    assert over.wasted_core_hours == pytest.approx((50 + 90 + 120) / 3600)


def test_a_value_written_fixed_is_kept_through_pandas_re_measurement():
    jobs = ReplayJobs(**SIX)
    # Re-measured, job 6 asks for PanDA's 150 s (50 s spare); written ...Fixed it
    # keeps the 120 s (20 s spare), like the five before it.
    remeasured = jobs.by_job(np.full(6, 120.0))
    assert remeasured.wasted_hours[-1] == pytest.approx(50 / 3600)
    fixed = jobs.by_job(np.full(6, 120.0), remeasure=False)
    assert fixed.wasted_hours == pytest.approx(np.full(6, 20.0) / 3600)
    # A task that keeps its scouts holds PanDA's measured value, never a Fixed
    # one: it is re-measured whatever the strategy writes elsewhere.
    kept = jobs.started_at_once("p", np.full(6, 120.0), [False] * 6, remeasure=False)
    assert kept == replace(jobs.scouts(), strategy="p")


def test_the_early_remeasurement_gives_jobs_4_and_5_the_scouts_measurement():
    jobs = ReplayJobs(**SIX)
    scouts = jobs.by_job()
    # Written the request (400 s) and left to PanDA, re-measured after 5 jobs:
    # jobs 1-5 spare 300 s each, job 6 asks ceil(100 x 1.5) = 150 s (50 spare).
    late = jobs.by_job(np.full(6, 400.0))
    assert late.wasted_hours == pytest.approx(np.array([300] * 5 + [50]) / 3600)
    # Re-measured after 3 settled jobs too: jobs 4 and 5 ask the same 150 s as
    # the scouts' bulk, without its wait.
    early = jobs.by_job(np.full(6, 400.0), early_remeasure=3)
    assert early.wasted_hours == pytest.approx(np.array([300] * 3 + [50] * 3) / 3600)
    assert early.wasted_hours == pytest.approx(scouts.wasted_hours)
    assert early.task_bulk_delay_s.tolist() == [0.0]
    assert scouts.task_bulk_delay_s.tolist() == [100.0]  # one scout run
    # A value written ...Fixed is never re-measured, early or not.
    fixed = jobs.by_job(np.full(6, 120.0), remeasure=False, early_remeasure=3)
    assert fixed.wasted_hours == pytest.approx(np.full(6, 20.0) / 3600)
    # A task that keeps its scouts is measured after them: the point adds nothing.
    kept = jobs.by_job(np.full(6, 120.0), np.zeros(6, dtype=bool), early_remeasure=3)
    assert kept.wasted_hours == pytest.approx(scouts.wasted_hours)
