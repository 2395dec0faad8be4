"""Tests of the simulated history: determinism, validation, structure, tails, drift."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd
import pytest

from panda_predictor.db.tables import panda_tables
from pipelines.simulation import (
    DriftEvent,
    SimulationConfig,
    simulate_frames,
    simulate_history,
)

TABLES = ("jedi_tasks", "jedi_datasets", "jobsarchived4")


@pytest.fixture(scope="module")
def history():
    """Return a 6000-task history plus 200 newly defined tasks (read-only)."""
    config = SimulationConfig(n_tasks=6000, n_defined=200, seed=11, batch_size=2500)
    return simulate_frames(config)


def _task_memory_mb(jobs: pd.DataFrame) -> pd.Series:
    """Return each task's median scout MAXPSS per core in MB (as ramCount sees it)."""
    scouts = jobs[jobs["specialhandling"] == "sj"]
    per_core = scouts["maxpss"] / 1024 / scouts["corecount"]
    return per_core.groupby(scouts["jeditaskid"]).median()


def test_same_seed_gives_identical_frames(seed):
    config = SimulationConfig(n_tasks=300, n_defined=20, seed=seed, batch_size=128)
    first, second = simulate_frames(config), simulate_frames(config)
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(first, name), getattr(second, name))


def test_other_seed_gives_other_frames(seed):
    first = simulate_frames(SimulationConfig(n_tasks=300, seed=seed))
    other = simulate_frames(SimulationConfig(n_tasks=300, seed=seed + 1))
    assert not first.jobsarchived4["maxpss"].equals(other.jobsarchived4["maxpss"])
    assert not first.jedi_tasks["processingtype"].equals(
        other.jedi_tasks["processingtype"]
    )


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"n_tasks": 0}, r"The 'n_tasks' parameter must be a positive integer\. Got 0"),
        (
            {"n_tasks": -5},
            r"The 'n_tasks' parameter must be a positive integer\. Got -5",
        ),
        (
            {"n_tasks": 2.5},
            r"The 'n_tasks' parameter must be a positive integer\. Got 2\.5",
        ),
        ({"n_tasks": True}, r"The 'n_tasks' parameter must be a positive integer"),
        (
            {"n_defined": -1},
            r"The 'n_defined' parameter must be a non-negative integer",
        ),
        ({"seed": -1}, r"The 'seed' parameter must be a non-negative integer\. Got -1"),
        ({"months": 0}, r"The 'months' parameter must be a positive integer"),
        ({"batch_size": 0}, r"The 'batch_size' parameter must be a positive integer"),
        ({"scouts_min": 0}, r"The 'scouts_min' parameter must be a positive integer"),
        (
            {"scouts_min": 5, "scouts_max": 3},
            r"The 'scouts_max' parameter must be an integer >= scouts_min \(5\)\. Got",
        ),
        ({"regular_min": -1}, r"The 'regular_min' parameter must be a non-negative"),
        ({"end_date": "2025-01-01"}, r"The 'end_date' parameter must be a datetime"),
        (
            {"months": 12, "drift_event": DriftEvent(start_month=12)},
            r"The 'start_month' parameter must be below months \(12\)\. Got 12",
        ),
    ],
    ids=[
        "zero-tasks",
        "negative-tasks",
        "float-tasks",
        "bool-tasks",
        "negative-defined",
        "negative-seed",
        "zero-months",
        "zero-batch",
        "zero-scouts",
        "scouts-max-below-min",
        "negative-regular",
        "string-end-date",
        "drift-after-period",
    ],
)
def test_bad_config_raises_naming_the_field(options, match):
    with pytest.raises(ValueError, match=match):
        SimulationConfig(**options)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"transhome": "Athena"}, r"The 'transhome' parameter must look like"),
        ({"start_month": -2}, r"The 'start_month' parameter must be a non-negative"),
        ({"memory_factor": 0}, r"The 'memory_factor' parameter must be a positive"),
        ({"share": 1.5}, r"The 'share' parameter must be in \(0, 1\]\. Got 1\.5"),
    ],
    ids=["no-version", "negative-month", "zero-factor", "share-above-one"],
)
def test_bad_drift_event_raises_naming_the_field(options, match):
    with pytest.raises(ValueError, match=match):
        DriftEvent(**options)


def test_unknown_drift_framework_is_rejected():
    config = SimulationConfig(n_tasks=10, drift_event=DriftEvent(transhome="Foo-1.0"))
    with pytest.raises(ValueError, match=r"must name a framework among"):
        next(simulate_history(config, progress=False))


def test_columns_are_the_tables_columns(history):
    tables = panda_tables(None)
    for name in TABLES:
        frame = getattr(history, name)
        assert set(frame.columns) <= set(getattr(tables, name).c.keys()), name
    assert history.jedi_tasks["jeditaskid"].is_unique
    assert history.jobsarchived4["pandaid"].is_unique
    assert not history.jedi_datasets.duplicated(["jeditaskid", "datasetid"]).any()


def test_batches_stream_with_continuing_ids():
    config = SimulationConfig(n_tasks=250, n_defined=30, batch_size=100)
    batches = list(simulate_history(config, progress=False))
    assert [len(b) for b in batches] == [100, 100, 50, 30]
    ids = np.concatenate([b.jobsarchived4["pandaid"].to_numpy() for b in batches])
    assert (np.diff(ids) == 1).all()
    task_ids = np.concatenate([b.jedi_tasks["jeditaskid"].to_numpy() for b in batches])
    assert (np.diff(task_ids) == 1).all()


def test_scouts_come_first_and_counts_follow_config():
    config = SimulationConfig(
        n_tasks=400, scouts_min=3, scouts_max=5, regular_min=2, regular_max=2
    )
    history = simulate_frames(config)
    jobs, tasks = history.jobsarchived4, history.jedi_tasks
    scouts = jobs["specialhandling"] == "sj"
    n_scouts = scouts.groupby(jobs["jeditaskid"]).sum()
    assert n_scouts.between(3, 5).all() and set(n_scouts) == {3, 4, 5}
    regular = (~scouts).groupby(jobs["jeditaskid"]).sum()
    broken = set(tasks.loc[tasks["status"] == "broken", "jeditaskid"])
    assert (regular[~regular.index.isin(broken)] == 2).all()
    first_regular = jobs[~scouts].groupby("jeditaskid")["starttime"].min()
    last_scout = jobs[scouts].groupby("jeditaskid")["endtime"].max()
    assert (first_regular > last_scout.reindex(first_regular.index)).all()
    created = tasks.set_index("jeditaskid")["creationdate"]
    assert (
        jobs["starttime"].to_numpy() > created.reindex(jobs["jeditaskid"]).to_numpy()
    ).all()


def test_history_tasks_ran_scouts(history):
    tasks = history.jedi_tasks
    old = tasks[~tasks["status"].isin(["defined", "ready"])]
    assert len(old) == 6000
    assert old["splitrule"].str.contains("US=3").all()
    assert set(old["status"]) == {"done", "finished", "failed", "broken"}
    assert old["creationdate"].is_monotonic_increasing
    assert old["creationdate"].max() < datetime(2026, 1, 1)
    assert old["creationdate"].min() >= datetime(2024, 1, 1)
    assert old["ramunit"].dropna().eq("MBPerCore").all()
    jobs = history.jobsarchived4
    assert 0 < (jobs["jobstatus"] == "failed").mean() < 0.1


def test_newly_defined_tasks_wait_for_scouts(history):
    tasks, datasets, jobs = history
    new = tasks[tasks["status"].isin(["defined", "ready"])]
    assert len(new) == 200 and set(new["status"]) == {"defined", "ready"}
    assert new["splitrule"].str.contains("US=2").all()
    assert not jobs["jeditaskid"].isin(new["jeditaskid"]).any()
    assert (new["creationdate"] >= datetime(2026, 1, 1)).all()
    assert new["ramcount"].isna().all()
    inputs = datasets[datasets["type"].isin(["input", "pseudo_input"])]
    status = inputs["jeditaskid"].map(tasks.set_index("jeditaskid")["status"])
    assert (inputs.loc[status == "defined", ["nfiles", "nevents"]] == 0).all().all()
    assert (inputs.loc[status == "ready", ["nfiles", "nevents"]] > 0).all().all()


def test_memory_has_heavy_tail_and_giants(history):
    memory = _task_memory_mb(history.jobsarchived4)
    assert memory.max() / memory.median() > 5
    giants = (memory > 5 * memory.median()).sum()
    assert 0.002 * len(memory) < giants < 0.05 * len(memory)
    inputs = history.jedi_datasets[history.jedi_datasets["type"] == "input"]
    events = inputs.loc[inputs["masterid"].isna(), "nevents"]
    assert events.quantile(0.99) / events.median() > 10


def test_newer_release_needs_more_memory(history):
    tasks = history.jedi_tasks.set_index("jeditaskid")
    memory = _task_memory_mb(history.jobsarchived4)
    home = tasks["transhome"].reindex(memory.index)
    old = memory[home == "AthSimulation-23.0.3"].median()
    new = memory[home == "AthSimulation-24.0.5"].median()
    assert new / old > 1.2


def test_processing_mix_changes_over_time(history):
    tasks = history.jedi_tasks[history.jedi_tasks["status"] != "defined"].iloc[:6000]
    early, late = tasks.iloc[:1500], tasks.iloc[-1500:]
    share = lambda part: (part["processingtype"] == "deriv").mean()  # noqa: E731
    assert share(late) > share(early) * 1.15


def test_drift_event_release_needs_more_memory_from_its_month():
    drift = DriftEvent(transhome="Athena-25.0.99", start_month=8, memory_factor=2.5)
    config = SimulationConfig(n_tasks=3000, months=12, seed=5, drift_event=drift)
    history = simulate_frames(config)
    tasks = history.jedi_tasks.set_index("jeditaskid")
    memory = _task_memory_mb(history.jobsarchived4)
    drifted = tasks["transhome"] == "Athena-25.0.99"
    assert drifted.sum() > 50
    first = tasks.loc[drifted, "creationdate"].min()
    assert first >= datetime(2025, 9, 1)  # month 8 of a period starting 2025-01
    same_type = tasks["processingtype"].reindex(memory.index)
    for ptype in ("recon", "merge"):
        mask = same_type == ptype
        home = tasks["transhome"].reindex(memory.index)
        ratio = (
            memory[mask & (home == "Athena-25.0.99")].median()
            / memory[
                mask & (home != "Athena-25.0.99") & home.str.startswith("Athena")
            ].median()
        )
        assert ratio > 1.8, ptype


def test_scout_values_fall_in_pandas_usual_ranges(history):
    tasks = history.jedi_tasks.dropna(subset=["ramcount"])
    cputime = np.where(
        tasks["cputimeunit"] == "mHS06sPerEvent",
        tasks["cputime"] / 1000,
        tasks["cputime"],
    )
    assert tasks["ramcount"].between(500, 8000).mean() > 0.9
    assert ((cputime >= 0.1) & (cputime <= 1000)).mean() > 0.9
    assert tasks["iointensity"].between(10, 5000).mean() > 0.9
    assert set(tasks["processingtype"]) >= {"evgen", "simul", "recon", "deriv", "merge"}
    power = (
        history.jobsarchived4.eval("hs06sec / corecount")
        / (
            history.jobsarchived4["endtime"] - history.jobsarchived4["starttime"]
        ).dt.total_seconds()
    )
    assert power.between(7.9, 20.1).mean() > 0.99
