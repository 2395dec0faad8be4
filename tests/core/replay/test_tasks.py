"""The task index the replay groups jobs by: ranks, sizes, bursts, scout delays."""

from __future__ import annotations

import pytest

from panda_predictor.core.replay.tasks import (
    job_rank,
    scout_delay,
    task_size,
    tasks_from_bursts,
)


def test_scout_delay_and_bursts():
    delay = scout_delay([0, 0, 0, 0, 0, 1], [10, 30, 1, 1, 1, 1], n_scouts=2)
    assert list(delay) == [0, 0, 30, 30, 30, 0]
    # Each task may have its own number of scouts (its first row counts).
    per_task = scout_delay([0, 0, 0, 1, 1, 1], [5, 1, 1, 2, 7, 1], [1, 1, 1, 2, 2, 2])
    assert list(per_task) == [0, 5, 5, 0, 0, 7]
    codes = tasks_from_bursts([0, 100, 5000, 10], [1, 1, 1, 2], gap_s=3600)
    assert codes[0] == codes[1] and len({codes[1], codes[2], codes[3]}) == 3


def test_job_rank_counts_each_task_in_row_order():
    # Tasks interleaved and numbered out of order: each keeps its rows' order.
    assert list(job_rank([7, 3, 7, 7, 3, 9])) == [0, 0, 1, 2, 1, 0]
    assert job_rank([]).size == 0


def test_task_size_counts_each_tasks_jobs():
    assert list(task_size([7, 3, 7, 7, 3, 9])) == [3, 2, 3, 3, 2, 1]
    assert task_size([]).size == 0


@pytest.mark.parametrize("n_scouts", [0, 1.5], ids=["none", "fractional"])
def test_scout_delay_errors(n_scouts):
    with pytest.raises(ValueError, match="The 'n_scouts' field must hold integers"):
        scout_delay([0, 0], [1, 1], n_scouts)
