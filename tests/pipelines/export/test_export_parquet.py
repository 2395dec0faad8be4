"""The Parquet exporter against real SQLite and PostgreSQL: layout, counts, resume."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

import pipelines.export.parquet as parquet_export
from panda_predictor.cli.export import export as export_command
from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.migrations import init_database
from pipelines.export import ExportMismatch, export_history
from pipelines.export.layout import MANIFEST, Manifest, Month, months_between
from pipelines.simulation import SimulationConfig, simulate_history
from pipelines.simulation.history_writer import load_history

#: After every simulated month: all of them are final.
LATER = datetime(2100, 1, 1)


@pytest.fixture
def history(settings):
    """Fill the test database with a small simulated history; return its settings."""
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    config = SimulationConfig(n_tasks=120, n_defined=0, seed=7)
    load_history(engine, settings, simulate_history(config, progress=False))
    engine.dispose()
    return settings


def _table(settings, name: str) -> pd.DataFrame:
    engine = make_engine(settings)
    try:
        table = getattr(get_panda_tables(settings, engine), name)
        with engine.connect() as conn:
            return pd.read_sql(sa.select(table), conn)
    finally:
        engine.dispose()


def test_months_between_spans_year_ends():
    months = months_between(datetime(2025, 11, 20), datetime(2026, 2, 1))
    assert [m.key for m in months] == ["2025-11", "2025-12", "2026-01", "2026-02"]
    assert months[1].end == datetime(2026, 1, 1)


def test_export_writes_every_row_once_per_month(history, tmp_path):
    out = tmp_path / "export"
    summary = export_history(history, out, batch_rows=37, progress=False, now=LATER)

    for name in parquet_export.TABLES:
        source = _table(history, name)
        exported = pd.read_parquet(out / name)
        assert summary.rows[name] == len(source) == len(exported) > 0
        key = ["jeditaskid", "datasetid"] if name == "jedi_datasets" else None
        key = key or (["pandaid"] if name == "jobsarchived4" else ["jeditaskid"])
        assert not exported.duplicated(key).any()
        assert set(map(tuple, exported[key].to_numpy())) == set(
            map(tuple, source[key].to_numpy())
        )
    tasks = pd.read_parquet(out / "jedi_tasks")
    for part in (out / "jedi_tasks").glob("month=*"):
        month = part.name.removeprefix("month=")
        in_part = tasks[tasks["month"].astype(str) == month]
        assert (in_part["creationdate"].dt.strftime("%Y-%m") == month).all()
    # Same schema in every month, whatever its NULLs.
    schemas = {
        str(pq.read_schema(p)) for p in (out / "jobsarchived4").rglob("*.parquet")
    }
    assert len(schemas) == 1


def test_a_second_run_skips_final_months_and_redoes_the_open_one(history, tmp_path):
    out = tmp_path / "export"
    tasks = _table(history, "jedi_tasks")
    last = tasks["creationdate"].max().to_pydatetime()
    first = export_history(history, out, progress=False, now=last)
    open_months = sum(
        1
        for entries in Manifest(out).tables.values()
        for entry in entries.values()
        if not entry["final"]
    )
    assert open_months >= 1  # the month holding 'now' is not final

    second = export_history(history, out, progress=False, now=LATER)

    assert sum(second.written.values()) == open_months
    assert sum(second.skipped.values()) == sum(first.written.values()) - open_months
    assert len(pd.read_parquet(out / "jedi_tasks")) == len(tasks)


def test_an_interrupted_export_resumes_without_duplicates(
    history, tmp_path, monkeypatch
):
    out = tmp_path / "export"
    real = parquet_export._export_month
    calls = {"n": 0}

    def dies_on_the_third(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(parquet_export, "_export_month", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        export_history(history, out, progress=False, now=LATER)
    monkeypatch.setattr(parquet_export, "_export_month", real)

    resumed = export_history(history, out, progress=False, now=LATER)

    assert sum(resumed.skipped.values()) == 2
    for name in parquet_export.TABLES:
        assert len(pd.read_parquet(out / name)) == len(_table(history, name))


def test_a_count_mismatch_keeps_nothing_and_names_the_month(
    history, tmp_path, monkeypatch
):
    out = tmp_path / "export"
    real = parquet_export._stream

    def drops_a_row(conn, query, batch_rows):
        for i, rows in enumerate(real(conn, query, batch_rows)):
            yield rows[1:] if i == 0 else rows

    monkeypatch.setattr(parquet_export, "_stream", drops_a_row)
    with pytest.raises(
        ExportMismatch, match=r"export of jedi_tasks for month \d{4}-\d{2}"
    ):
        export_history(history, out, progress=False, now=LATER)
    assert not list(out.rglob("*.parquet"))
    assert not list(out.rglob(".*.tmp"))
    assert not (out / MANIFEST).exists()


def test_null_times_go_to_their_own_partition(history, tmp_path):
    engine = make_engine(history)
    jobs = get_panda_tables(history, engine).jobsarchived4
    with engine.begin() as conn:
        pandaid = conn.execute(sa.select(sa.func.min(jobs.c.pandaid))).scalar_one()
        conn.execute(
            jobs.update().where(jobs.c.pandaid == pandaid).values(endtime=None)
        )
    engine.dispose()

    export_history(history, tmp_path / "x", progress=False, now=LATER)

    part = pd.read_parquet(tmp_path / "x" / "jobsarchived4" / "month=none")
    assert part["pandaid"].tolist() == [pandaid]
    assert not Manifest(tmp_path / "x").is_final("jobsarchived4", Month(None, None))


def test_export_command_prints_a_summary(history, tmp_path):
    result = CliRunner().invoke(
        export_command,
        ["--to", "parquet", str(tmp_path / "e"), "--no-progress"],
        obj=history,
    )
    assert result.exit_code == 0, result.output
    assert "jobsarchived4:" in result.output and "rows)" in result.output


def test_export_command_rejects_a_foreign_manifest(history, tmp_path):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / MANIFEST).write_text('{"version": 99, "tables": {}}')
    result = CliRunner().invoke(
        export_command,
        ["--to", "parquet", str(tmp_path / "e"), "--no-progress"],
        obj=history,
    )
    assert result.exit_code == 1
    assert "must have version 1. Got 99" in result.output
