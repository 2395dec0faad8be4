"""One task's jobs replayed one after another, on cases done by hand."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core.replay.panda_rules import ReplayRules
from panda_predictor.core.replay.task_replay import replay_task


def test_a_time_job_climbs_one_class_at_a_time_until_it_fits():
    out = replay_task(
        np.array([35.0]),
        np.array([35.0]),
        np.array([10.0]),
        "time",
        np.array([10.0, 20.0, 40.0]),
        ReplayRules(),
    )
    # 10 and 20 fail, 40 fits: two failed attempts of 10 and 20 s.
    assert out.failed_attempts.tolist() == [2]
    assert out.final_request.tolist() == [40.0]
    assert out.lost_s.tolist() == [30.0] and not out.lost.any()


def test_a_time_retry_stops_at_the_cap_until_the_cap_failed():
    out = replay_task(
        np.array([35.0]),
        np.array([35.0]),
        np.array([10.0]),
        "time",
        np.array([10.0, 40.0]),
        ReplayRules(),
        cap=np.array([30.0]),
    )
    # 10 fails, the retry stops at the cap 30, which fails too: only then the
    # next class, 40, which fits.
    assert out.failed_attempts.tolist() == [2] and not out.lost.any()
    assert out.final_request.tolist() == [40.0]
    assert out.lost_s.tolist() == [40.0]  # 10 + 30 s


def test_the_jobs_after_the_scouts_ask_for_their_measurement():
    out = replay_task(
        np.array([1000.0, 1200.0, 1100.0]),
        np.array([3600.0] * 3),
        np.array([5000.0] * 3),
        "memory",
        np.array([5000.0]),
        ReplayRules(),
        n_scouts=2,
    )
    # p75(1000, 1200) = 1150 MB -> 1177600 kB x 110 // 100 / 1024 = 1265 MB.
    assert out.final_request.tolist() == pytest.approx([5000.0, 5000.0, 1265.0])
    assert out.failed_attempts.tolist() == [0, 0, 0]


def _time_task(used: list[float], **kwargs: int) -> np.ndarray:
    """Replay a time task asking 400 s per job; return each job's last request."""
    n = len(used)
    out = replay_task(
        np.array(used),
        np.array(used),
        np.full(n, 400.0),
        "time",
        np.array([50.0, 200.0, 400.0]),
        ReplayRules(),
        remeasure=True,
        **kwargs,
    )
    return out.final_request


def test_the_early_remeasurement_counts_lost_jobs_as_the_scouts_do():
    # Job 2 is lost (400, 800 and 1600 s all fail). Its first 3 jobs are settled
    # after job 3, so the early re-measurement comes there, from the 2 finished
    # jobs, as the scouts' measurement does: jobs 4-6 ask what the bulk would.
    used = [100.0, 9000.0, 100.0, 100.0, 100.0, 100.0]
    early = _time_task(used, early=3)
    scouts = _time_task(used, n_scouts=3)
    assert early[3:].tolist() == scouts[3:].tolist() == [150.0] * 3
    # Without it, job 4 ran on the 400 s written, and PanDA measured at 5.
    assert _time_task(used)[3] == 400.0


def test_the_early_remeasurement_waits_for_a_finished_job():
    # The first 3 jobs are all lost: nothing to measure yet, so it comes after
    # the first finished job (job 4), and job 5 asks for its measurement.
    used = [9000.0, 9000.0, 9000.0, 100.0, 100.0, 100.0]
    assert _time_task(used, early=3)[3:].tolist() == [400.0, 150.0, 150.0]
