"""The hook's incremental history equals a fresh full read, pass after pass, while
finished tasks arrive, old tasks change and tasks leave the window (SQLite and
PostgreSQL)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pandas as pd
import pytest

from panda_predictor.db.engine import get_panda_tables
from panda_predictor.serving.recent import IncrementalHistory, read_history_frame
from pipelines.simulation import SimulationConfig, simulate_history
from pipelines.simulation.generator import HistoryBatch
from pipelines.simulation.history_writer import load_history


def _arrivals(batches: list[HistoryBatch]) -> pd.Series:
    """When each task's rows are all in PanDA: its last stamp (task or job)."""
    tasks = pd.concat([b.jedi_tasks for b in batches], ignore_index=True)
    jobs = pd.concat([b.jobsarchived4 for b in batches], ignore_index=True)
    last_job = jobs.groupby("jeditaskid")["endtime"].max()
    stamps = tasks.set_index("jeditaskid")[["creationdate", "modificationtime"]]
    stamps = stamps.join(last_job.rename("endtime"))
    return pd.to_datetime(stamps.max(axis=1))


def _subset(batches: list[HistoryBatch], ids: set[int]) -> list[HistoryBatch]:
    return [
        HistoryBatch(
            b.jedi_tasks[b.jedi_tasks["jeditaskid"].isin(ids)],
            b.jedi_datasets[b.jedi_datasets["jeditaskid"].isin(ids)],
            b.jobsarchived4[b.jobsarchived4["jeditaskid"].isin(ids)],
        )
        for b in batches
    ]


@pytest.mark.parametrize("overlap_minutes", [0, 30])
def test_incremental_history_equals_a_full_read_after_every_pass(
    db, settings, seed, overlap_minutes
):
    batches = list(
        simulate_history(SimulationConfig(n_tasks=400, n_defined=0, seed=seed))
    )
    arrival = _arrivals(batches).sort_values()
    passes = [arrival.quantile(q) for q in (0.4, 0.55, 0.7, 0.85)]
    passes.append(arrival.max() + timedelta(seconds=1))
    span = (passes[-1] - arrival.min()) / timedelta(days=1)
    days = max(1, math.ceil(span / 2))  # early tasks leave the window on the way
    history = IncrementalHistory(
        db,
        settings,
        days=days,
        overlap=timedelta(minutes=overlap_minutes),
        full_read_every=timedelta(days=10 * 365),  # the passes are days apart
    )
    tasks = get_panda_tables(settings, db).jedi_tasks
    loaded: set[int] = set()
    for number, now in enumerate(passes):
        arrived = set(arrival[arrival <= now].index) - loaded
        load_history(db, settings, _subset(batches, arrived))
        changed_old = set()
        if loaded:
            # JEDI changes a task already read: a new processing type, stamped now.
            old = sorted(loaded)[-(number + 1)]
            with db.begin() as conn:
                conn.execute(
                    tasks.update()
                    .where(tasks.c.jeditaskid == old)
                    .values(
                        processingtype=f"changed{number}",
                        modificationtime=now - timedelta(seconds=1),
                    )
                )
            changed_old = {old}
        loaded |= arrived
        incremental = history.frame(now=now)
        full = read_history_frame(db, settings, now=now, days=days)
        assert len(full) > 0
        pd.testing.assert_frame_equal(incremental, full)
        if number > 0:
            assert history.last_changed is not None  # not a full read
            assert arrived | changed_old <= set(history.last_changed)
            assert len(history.last_changed) < len(loaded)
    assert any(full["processingtype"].str.startswith("changed"))


def test_full_read_again_when_due(db, settings, seed):
    load_history(
        db,
        settings,
        simulate_history(SimulationConfig(n_tasks=50, n_defined=0, seed=seed)),
    )
    last = datetime(2100, 1, 1)  # after every stamp of the simulated history
    history = IncrementalHistory(
        db, settings, days=100 * 365, full_read_every=timedelta(hours=1)
    )
    history.frame(now=last + timedelta(minutes=1))
    history.frame(now=last + timedelta(minutes=2))
    assert history.last_changed == []
    history.frame(now=last + timedelta(hours=2))
    assert history.last_changed is None  # read whole again
