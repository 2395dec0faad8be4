"""Writing a simulated history into real SQLite and PostgreSQL, and the CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from panda_predictor.cli.simulate import simulate
from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.migrations import init_database
from pipelines.simulation import SimulationConfig, simulate_frames, simulate_history
from pipelines.simulation.config import weekly_history_end
from pipelines.simulation.history_writer import (
    ensure_panda_tables,
    load_history,
    write_batch,
)


@pytest.fixture
def engine(settings):
    engine = make_engine(settings)
    yield engine
    engine.dispose()


def _count(engine, settings, table_name: str, **where) -> int:
    table = getattr(get_panda_tables(settings, engine), table_name)
    query = sa.select(sa.func.count()).select_from(table)
    for column, value in where.items():
        query = query.where(table.c[column] == value)
    with engine.connect() as conn:
        return conn.execute(query).scalar_one()


def test_history_is_written_to_every_table(engine, settings, seed):
    config = SimulationConfig(n_tasks=500, n_defined=40, seed=seed, batch_size=200)
    assert ensure_panda_tables(engine, settings) is True
    assert ensure_panda_tables(engine, settings) is False
    totals = load_history(engine, settings, simulate_history(config, progress=False))
    expected = simulate_frames(config)
    for name in ("jedi_tasks", "jedi_datasets", "jobsarchived4"):
        assert totals[name] == len(getattr(expected, name)) > 0
        assert _count(engine, settings, name) == totals[name]
    assert _count(engine, settings, "jobsarchived4", specialhandling="sj") == int(
        (expected.jobsarchived4["specialhandling"] == "sj").sum()
    )
    new = expected.jedi_tasks["status"].isin(["defined", "ready"]).sum()
    written_new = _count(engine, settings, "jedi_tasks", status="defined") + _count(
        engine, settings, "jedi_tasks", status="ready"
    )
    assert written_new == new == 40


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "core-insert"])
def test_values_survive_the_round_trip(engine, settings, seed, fast):
    init_database(engine, settings, with_panda_tables=True)
    batch = next(
        simulate_history(SimulationConfig(n_tasks=50, seed=seed), progress=False)
    )
    counts = write_batch(engine, settings, batch, fast=fast)
    assert counts["jobsarchived4"] == _count(engine, settings, "jobsarchived4") > 0
    tasks = get_panda_tables(settings, engine).jedi_tasks
    with engine.connect() as conn:
        created = conn.execute(
            sa.select(sa.func.max(tasks.c.creationdate))
        ).scalar_one()
    assert created == batch.jedi_tasks["creationdate"].max().to_pydatetime()
    jobs = get_panda_tables(settings, engine).jobsarchived4
    first = batch.jobsarchived4.iloc[0]
    with engine.connect() as conn:
        row = conn.execute(
            sa.select(jobs).where(jobs.c.pandaid == int(first["pandaid"]))
        ).one()
    assert row.maxpss == first["maxpss"]
    assert row.starttime == first["starttime"].to_pydatetime()
    assert row.specialhandling == "sj"
    assert row.jobmetrics is None


def test_cli_creates_tables_and_writes(settings):
    result = CliRunner().invoke(
        simulate,
        [
            "--tasks",
            "120",
            "--defined",
            "10",
            "--seed",
            "3",
            "--batch-size",
            "50",
            "--no-progress",
        ],
        obj=settings,
    )
    assert result.exit_code == 0, result.output
    assert "Created the PanDA test tables." in result.output
    assert "rows into jobsarchived4" in result.output
    engine = make_engine(settings)
    try:
        assert _count(engine, settings, "jedi_tasks") == 130
        # Without --end-date the history ends within the last week, whole weeks
        # from the fixed date: the new tasks are that day's, on its weekday.
        tasks = get_panda_tables(settings, engine).jedi_tasks
        with engine.connect() as conn:
            newest = conn.execute(sa.select(sa.func.max(tasks.c.creationdate))).scalar()
        end = weekly_history_end()
        assert end < newest < end + timedelta(days=1)
        assert end > datetime.now(UTC).replace(tzinfo=None) - timedelta(days=8)
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--tasks", "0"], "The 'n_tasks' parameter must be a positive integer. Got 0"),
        (["--seed", "-4"], "The 'seed' parameter must be a non-negative integer."),
        (["--batch-size", "0"], "The 'batch_size' parameter must be a positive"),
    ],
    ids=["zero-tasks", "negative-seed", "zero-batch"],
)
def test_cli_rejects_bad_sizes(tmp_path, args, match):
    from panda_predictor.settings import load_settings

    settings = load_settings(home=tmp_path, db_url=f"sqlite:///{tmp_path / 'p.sqlite'}")
    result = CliRunner().invoke(simulate, [*args, "--no-progress"], obj=settings)
    assert result.exit_code == 2
    assert match in result.output
    assert not (tmp_path / "p.sqlite").exists()


def test_cli_help_shows_an_example():
    result = CliRunner().invoke(simulate, ["--help"])
    assert result.exit_code == 0
    assert "SIMULATED" in result.output and "--defined" in result.output
    assert "panda-predictor simulate --tasks" in result.output
