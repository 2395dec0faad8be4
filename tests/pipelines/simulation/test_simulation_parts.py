"""The simulated history's parts: catalog, tasks, jobs, datasets, requirements.

The whole history is tested in test_simulate.py; these check each part's own
promise on a small world (SIMULATED data, not ATLAS figures).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from pipelines.params import load_params
from pipelines.simulation import SimulationConfig, simulate_frames
from pipelines.simulation.catalog import build_catalog, choose_rows
from pipelines.simulation.config import DEFAULT_END_DATE, weekly_history_end
from pipelines.simulation.datasets import dataset_frame
from pipelines.simulation.jobs import _to_datetime
from pipelines.simulation.requirements import fill_requirements
from pipelines.simulation.tasks import (
    creation_times,
    draw_tasks,
    period_start,
    task_names,
)


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


def _moved_back(frame: pd.DataFrame, by: pd.Timedelta) -> pd.DataFrame:
    """Return ``frame`` with every datetime column moved ``by`` earlier."""
    out = frame.copy()
    for name in out.columns:
        if pd.api.types.is_datetime64_any_dtype(out[name]):
            out[name] = out[name] - by
    return out


@pytest.mark.parametrize("moved", [timedelta(weeks=48), timedelta(days=45, hours=5)])
def test_a_seed_draws_the_same_history_for_every_end_only_moved(moved):
    # The demo's history ends near today: the draws must not depend on the day,
    # or the demo trains a different model, and its gate decides otherwise, daily.
    base = simulate_frames(SimulationConfig(n_tasks=150, n_defined=5, seed=4))
    later = simulate_frames(
        SimulationConfig(
            n_tasks=150, n_defined=5, seed=4, end_date=DEFAULT_END_DATE + moved
        )
    )
    for name in ("jedi_tasks", "jedi_datasets", "jobsarchived4"):
        pd.testing.assert_frame_equal(
            _moved_back(getattr(later, name), pd.Timedelta(moved)),
            getattr(base, name),
        )
    assert later.jedi_tasks["creationdate"].max() > DEFAULT_END_DATE + moved


def test_the_weekly_end_is_the_newest_whole_week_from_the_fixed_date():
    for latest in (datetime(2026, 12, 6), datetime(2026, 12, 3), datetime(2027, 2, 1)):
        end = weekly_history_end(latest)
        assert latest - timedelta(weeks=1) < end <= latest
        assert (end - DEFAULT_END_DATE) % timedelta(weeks=1) == timedelta(0)
        assert end.weekday() == DEFAULT_END_DATE.weekday()
    assert weekly_history_end(datetime(2026, 12, 3, 7)) == datetime(2026, 12, 3)
    assert weekly_history_end(DEFAULT_END_DATE) == DEFAULT_END_DATE


@pytest.fixture(scope="module")
def small_world():
    return simulate_frames(SimulationConfig(n_tasks=120, n_defined=4, seed=3))


def test_every_job_and_dataset_belongs_to_a_task(small_world):
    tasks = set(small_world.jedi_tasks["jeditaskid"])
    assert set(small_world.jobsarchived4["jeditaskid"]) <= tasks
    assert set(small_world.jedi_datasets["jeditaskid"]) <= tasks
    assert len(small_world.jedi_tasks) == 124


def test_the_requirements_come_from_the_finished_scouts_alone(small_world):
    tasks, jobs = small_world.jedi_tasks, small_world.jobsarchived4
    again = fill_requirements(tasks, jobs)
    pd.testing.assert_frame_equal(again, tasks)
    # Without their scout jobs the history tasks lose their measured ramcount.
    no_scouts = jobs[jobs["specialhandling"] != "sj"]
    blind = fill_requirements(tasks, no_scouts)
    history = tasks["status"] == "done"
    assert blind.loc[history, "ramcount"].isna().any()


def test_new_tasks_datasets_are_not_done(small_world):
    """pipelines.simulation.datasets: history datasets done, new ones not yet."""
    datasets = small_world.jedi_datasets
    new_ids = set(small_world.jedi_tasks["jeditaskid"].nlargest(4))
    new = datasets["jeditaskid"].isin(new_ids)
    assert set(datasets.loc[new, "status"]) <= {"defined", "ready"}
    assert "done" in set(datasets.loc[~new, "status"])


def test_epoch_seconds_become_datetimes_and_minus_infinity_none():
    out = _to_datetime(np.array([0.0, 86400.4, -np.inf]))
    assert out[:2].tolist() == [
        np.datetime64("1970-01-01T00:00:00", "us").item(),
        np.datetime64("1970-01-02T00:00:00", "us").item(),
    ]
    assert np.isnat(out[2])


def test_jobs_never_end_before_they_start(small_world):
    jobs = small_world.jobsarchived4
    start = pd.to_datetime(jobs["starttime"])
    end = pd.to_datetime(jobs["endtime"])
    assert (end >= start).all()


@pytest.mark.parametrize("new", [False, True])
def test_dataset_ids_run_on_from_the_first_and_new_datasets_wait(new):
    cfg = SimulationConfig(n_tasks=30, n_defined=6, seed=5)
    cat = build_catalog(cfg.params, None)
    rng = np.random.default_rng(5)
    n = cfg.n_defined if new else cfg.n_tasks
    draw = draw_tasks(rng, cfg, cat, 1000, np.arange(n), new)
    frame = dataset_frame(rng, cat, draw, task_names(rng, cat, draw), 500, new)
    assert frame["datasetid"].tolist() == list(range(500, 500 + len(frame)))
    assert set(frame["jeditaskid"]) == set(range(1000, 1000 + n))
    statuses = set(frame["status"])
    assert statuses <= {"defined", "ready"} if new else statuses == {"done"}
