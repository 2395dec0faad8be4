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
