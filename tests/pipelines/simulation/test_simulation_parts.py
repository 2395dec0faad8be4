"""The simulated history's parts: catalog, tasks, jobs, datasets, requirements.

The whole history is tested in test_simulate.py; these check each part's own
promise on a small world (SIMULATED data, not ATLAS figures).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipelines.params import load_params
from pipelines.simulation import SimulationConfig, simulate_frames
from pipelines.simulation.catalog import build_catalog, choose_rows
from pipelines.simulation.datasets import dataset_frame
from pipelines.simulation.jobs import job_frame
from pipelines.simulation.requirements import fill_requirements
from pipelines.simulation.tasks import creation_times, draw_tasks, period_start


def test_choose_rows_draws_by_weight_and_never_a_zero_weight_column():
    rng = np.random.default_rng(0)
    weights = np.tile([0.0, 1.0, 3.0], (20_000, 1))
    drawn = choose_rows(rng, weights)
    assert set(np.unique(drawn)) == {1, 2}
    assert np.mean(drawn == 2) == pytest.approx(0.75, abs=0.02)


def test_the_catalogs_arrays_agree_in_length():
    cat = build_catalog(load_params("simulation"), None)
    assert cat.framework_probs.shape == (len(cat.ptypes), len(cat.frameworks))
    n_releases = len(cat.rel_version)
    for array in (cat.rel_framework, cat.rel_memory, cat.rel_cpu, cat.rel_from):
        assert len(array) == n_releases
    assert cat.site_cum_share[-1] == pytest.approx(1.0)
    assert not cat.rel_is_drift.any()  # no drift event asked for


def test_creation_times_rise_inside_the_period():
    cfg = SimulationConfig(n_tasks=50, n_defined=5, seed=1)
    rng = np.random.default_rng(1)
    old = creation_times(rng, cfg, np.arange(50), new=False)
    new = creation_times(rng, cfg, np.arange(5), new=True)
    end = np.datetime64(cfg.end_date, "s")
    assert np.all(np.diff(old.astype(np.int64)) > 0)
    assert old[0] >= period_start(cfg) and old[-1] <= end < new[0]


@pytest.fixture(scope="module")
def small_world():
    return simulate_frames(SimulationConfig(n_tasks=120, n_defined=4, seed=3))


def test_every_job_and_dataset_belongs_to_a_task(small_world):
    tasks = set(small_world.jedi_tasks["jeditaskid"])
    assert set(small_world.jobsarchived4["jeditaskid"]) <= tasks
    assert set(small_world.jedi_datasets["jeditaskid"]) <= tasks
    assert len(small_world.jedi_tasks) == 124


def test_the_parts_are_the_functions_the_history_is_built_from():
    # Each part is importable on its own and callable; their signatures are what
    # simulate_frames composes (a rename would break it here first).
    for part in (draw_tasks, job_frame, dataset_frame, fill_requirements):
        assert callable(part) and part.__doc__


def test_jobs_never_end_before_they_start(small_world):
    jobs = small_world.jobsarchived4
    start = pd.to_datetime(jobs["starttime"])
    end = pd.to_datetime(jobs["endtime"])
    assert (end >= start).all()
