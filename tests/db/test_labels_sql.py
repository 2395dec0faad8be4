"""Labels computed by SQL on PostgreSQL equal the Python labels on the same rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from conftest import POSTGRES_URL

from panda_predictor.core.labels import labels_frame
from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.labels_sql import (
    LabelsSqlUnsupported,
    label_aggregates_query,
    labels_by_range,
    labels_from_db,
)
from panda_predictor.db.reader import iter_history
from panda_predictor.db.tables import panda_tables
from panda_predictor.settings import load_settings
from tests.core.test_labels import load_history, make_history


@pytest.mark.postgres
def test_sql_labels_equal_python_labels(seed, tmp_path, pg_schema):
    lite = load_settings(home=tmp_path, db_url=f"sqlite:///{tmp_path / 'panda.sqlite'}")
    pg = load_settings(home=tmp_path, db_url=POSTGRES_URL, db_schema=pg_schema)
    generated_tasks, generated_jobs = make_history(seed, n_tasks=80)
    load_history(lite, generated_tasks, generated_jobs)
    engine = make_engine(lite)
    chunks = list(iter_history(engine, lite, chunk_size=1000))
    engine.dispose()
    ((tasks, jobs),) = chunks
    python = labels_frame(jobs, tasks)
    orphans = generated_jobs[~generated_jobs["jeditaskid"].isin(tasks["jeditaskid"])]
    columns = generated_jobs.columns
    load_history(
        pg, tasks[generated_tasks.columns], pd.concat([jobs[columns], orphans])
    )

    engine = make_engine(pg)
    try:
        sql = labels_from_db(
            engine,
            get_panda_tables(pg, engine),
            tasks["jeditaskid"].tolist() + [424242],
        )
    finally:
        engine.dispose()

    assert list(sql.columns) == list(python.columns)
    assert sql["jeditaskid"].tolist() == python["jeditaskid"].tolist()
    assert (sql["n_scouts"] > 0).sum() > 30
    assert sql["n_scouts"].tolist() == python["n_scouts"].tolist()
    for name in ("ramcount", "cputime", "iointensity", "walltime"):
        np.testing.assert_allclose(sql[name], python[name], rtol=1e-9, err_msg=name)
        assert (
            sql[f"{name}_value"].isna().tolist()
            == python[f"{name}_value"].isna().tolist()
        )
        assert (
            sql[f"{name}_unit"].fillna("") == python[f"{name}_unit"].fillna("")
        ).all()
    assert (sql["cputime_unit"] == "mHS06sPerEvent").any()
    never = pd.Timestamp(0)
    assert (
        sql["labels_known_at"].fillna(never) == python["labels_known_at"].fillna(never)
    ).all()


def test_sqlite_says_to_use_the_python_labels(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    with pytest.raises(
        LabelsSqlUnsupported, match=r"'sqlite' database lacks.*labels_frame"
    ):
        labels_from_db(engine, panda_tables(None), [1])


def test_oracle_statement_compiles_with_tag_and_percentile():
    from sqlalchemy.dialects import oracle

    query = label_aggregates_query(panda_tables("ATLAS_PANDA"), "oracle")
    sql = str(query.compile(dialect=oracle.dialect()))
    assert sql.startswith(
        "SELECT /* panda_predictor.db.labels_sql.label_aggregates_query */"
    )
    assert (
        "percentile_cont(:percentile_cont_1) WITHIN GROUP (ORDER BY scouts.ram_kb)"
        in sql
    )
    assert "BINARY_DOUBLE" in sql and "GROUP BY scouts.jeditaskid" in sql


@pytest.mark.postgres
def test_sql_labels_by_range_equal_python_labels_in_any_window(tmp_path, pg_schema):
    from pipelines.simulation import SimulationConfig, simulate_frames
    from pipelines.simulation.history_writer import ensure_panda_tables
    from pipelines.simulation.history_writer import load_history as load

    pg = load_settings(home=tmp_path, db_url=POSTGRES_URL, db_schema=pg_schema)
    frames = simulate_frames(SimulationConfig(n_tasks=300, n_defined=0, seed=4))
    engine = make_engine(pg)
    try:
        ensure_panda_tables(engine, pg)
        load(engine, pg, [frames])
        tables = get_panda_tables(pg, engine)
        everything = labels_by_range(engine, tables, chunk_size=37)
        created = frames.jedi_tasks["creationdate"]
        since, until = created.quantile(0.3), created.quantile(0.8)
        window = labels_by_range(
            engine, tables, chunk_size=50, since=since, until=until
        )
    finally:
        engine.dispose()

    python = labels_frame(frames.jobsarchived4, frames.jedi_tasks)
    _same_labels(everything, python)
    inside = frames.jedi_tasks[(created >= since) & (created < until)]
    _same_labels(window, python[python["jeditaskid"].isin(inside["jeditaskid"])])
    assert 0 < len(window) < len(everything) == 300


def _same_labels(sql: pd.DataFrame, python: pd.DataFrame) -> None:
    python = python.reset_index(drop=True)
    assert sql["jeditaskid"].tolist() == python["jeditaskid"].tolist()
    assert sql["n_scouts"].tolist() == python["n_scouts"].tolist()
    for name in ("ramcount", "cputime", "iointensity", "walltime"):
        np.testing.assert_allclose(sql[name], python[name], rtol=1e-9, err_msg=name)
        assert (
            sql[f"{name}_unit"].fillna("") == python[f"{name}_unit"].fillna("")
        ).all()


def test_oracle_range_statement_compiles_with_between_and_pruning():
    from datetime import datetime

    from sqlalchemy.dialects import oracle

    query = label_aggregates_query(
        panda_tables("ATLAS_PANDA"),
        "oracle",
        by_range=True,
        since=datetime(2026, 1, 1),
    )
    sql = str(query.compile(dialect=oracle.dialect()))
    assert "jobsarchived4.jeditaskid BETWEEN :low AND :high" in sql
    assert "jobsarchived4.endtime >= :endtime_1" in sql
    assert "WITHIN GROUP" in sql
