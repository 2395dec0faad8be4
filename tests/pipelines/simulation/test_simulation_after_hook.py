"""Jobs of the new tasks after the hook: consistent with the simulated truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipelines.simulation import SimulationConfig, simulate_frames
from pipelines.simulation.generator import newly_defined_draws
from pipelines.simulation.outcomes import jobs_after_hook, limit_memory


@pytest.fixture
def small(seed):
    config = SimulationConfig(n_tasks=60, n_defined=10, seed=seed, batch_size=4)
    frames = simulate_frames(config)
    new = frames.jedi_tasks["status"].isin(["defined", "ready"])
    return config, frames.jedi_tasks.loc[new, "jeditaskid"].astype(int).tolist()


def test_applied_tasks_run_without_scouts_and_kept_ones_with(small):
    config, new_ids = small
    applied = {new_ids[0]: 1e6, new_ids[5]: 1e6}
    kept = new_ids[6:8]
    jobs = jobs_after_hook(config, applied, kept, first_panda_id=10**10)
    assert set(jobs["jeditaskid"]) == set(applied) | set(kept)
    assert jobs["pandaid"].min() == 10**10 and jobs["pandaid"].is_unique
    scouts = jobs["specialhandling"] == "sj"
    assert not scouts[jobs["jeditaskid"].isin(list(applied))].any()
    assert set(jobs.loc[scouts, "jeditaskid"]) == set(kept)
    # A huge request fits every job: applied jobs ask exactly for it per core.
    mine = jobs[jobs["jeditaskid"].isin(list(applied))]
    assert (mine["minramcount"] == np.rint(1e6 * mine["corecount"])).all()


def test_the_same_seed_gives_the_same_jobs_and_truth(small):
    config, new_ids = small
    first = jobs_after_hook(config, {new_ids[1]: 2000.0}, [new_ids[2]], 1)
    again = jobs_after_hook(config, {new_ids[1]: 2000.0}, [new_ids[2]], 1)
    pd.testing.assert_frame_equal(first, again)


def test_too_small_a_request_makes_jobs_fail_at_the_limit(small):
    config, new_ids = small
    roomy = jobs_after_hook(config, {new_ids[3]: 1e6}, [], 1)
    tight = jobs_after_hook(config, {new_ids[3]: 10.0}, [], 1)
    assert (tight["jobstatus"] == "failed").all()
    assert (tight["maxpss"] == tight["minramcount"] * 1024).all()
    assert (roomy["jobstatus"] == "finished").any()


def test_limit_memory_leaves_unrequested_jobs_alone():
    jobs = pd.DataFrame(
        {
            "jobstatus": ["finished"] * 3,
            "maxpss": [3000 * 1024, 1000 * 1024, 5000 * 1024],
            "maxrss": [0, 0, 0],
            "minramcount": [2000, 2000, 2000],
            "nevents": [10, 10, 10],
            "outputfilebytes": [5, 5, 5],
        }
    )
    out = limit_memory(jobs, pd.Series([2000.0, 2000.0, np.nan]))
    assert list(out["jobstatus"]) == ["failed", "finished", "finished"]
    assert list(out["maxpss"]) == [2000 * 1024, 1000 * 1024, 5000 * 1024]
    assert out.loc[0, "nevents"] == 0 and out.loc[1, "nevents"] == 10


def test_jobs_use_the_memory_the_task_was_simulated_with(small):
    config, new_ids = small
    jobs = jobs_after_hook(config, {}, new_ids, 1)
    need = {}
    for _, draw, _ in newly_defined_draws(config):
        for i, task in enumerate(draw.task_id):
            need[int(task)] = (
                draw.base_ram_mb[i] + draw.mem_per_core_mb[i] * (draw.corecount[i])
            )
    assert set(need) == set(new_ids)
    finished = jobs[jobs["jobstatus"] == "finished"]
    ratio = finished["maxpss"] / 1024 / finished["jeditaskid"].map(need)
    assert 0.7 < ratio.median() < 1.4
