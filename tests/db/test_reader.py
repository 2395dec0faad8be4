"""Reading task features, eligible tasks and history, on SQLite and PostgreSQL."""

from __future__ import annotations

import math
from datetime import datetime

import pandas as pd
import pytest
import sqlalchemy as sa
from test_db_support import (
    add_task,
    make_prediction,
)

from panda_predictor.db.engine import DatabaseError, make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.db.reader import (
    AGGREGATE_COLUMNS,
    find_eligible_tasks,
    iter_history,
    read_task_features,
)
from panda_predictor.db.tables import panda_tables
from panda_predictor.db.writer import write_predictions
from panda_predictor.settings import load_settings


def test_read_task_features_aggregates_input_datasets(db, settings):
    add_task(
        db,
        settings,
        1,
        datasets=(("input", 10, 1000), ("pseudo_input", 2, 50), ("output", 99, 9999)),
    )
    add_task(db, settings, 2, corecount=None)
    add_task(db, settings, 3, datasets=(("input", None, None), ("log", 1, 1)))
    add_task(db, settings, 4, datasets=(("input", 0, 0),))

    frame = read_task_features(db, settings, [3, 1, 2, 4, 999])

    assert list(frame["jeditaskid"]) == [1, 2, 3, 4]
    assert frame["jeditaskid"].dtype == "int64"
    assert list(frame["n_input_datasets"]) == [2, 0, 1, 1]
    by_id = frame.set_index("jeditaskid")
    assert by_id.loc[1, "nfiles_sum"] == 12 and by_id.loc[1, "nevents_sum"] == 1050
    assert math.isnan(by_id.loc[2, "nfiles_sum"]) and math.isnan(
        by_id.loc[2, "nevents_sum"]
    )
    assert math.isnan(by_id.loc[3, "nfiles_sum"])
    assert by_id.loc[4, "nevents_sum"] == 0
    assert math.isnan(by_id.loc[2, "corecount"]) and by_id.loc[1, "corecount"] == 8
    assert by_id.loc[1, "transhome"] == "AthSimulation-23.0.1"
    assert set(panda_tables(None).jedi_tasks.c.keys()) | set(AGGREGATE_COLUMNS) == set(
        frame.columns
    )


def test_read_task_features_of_nothing_is_an_empty_frame(db, settings):
    frame = read_task_features(db, settings, [])
    assert frame.empty and "nfiles_sum" in frame.columns


def test_read_task_features_reads_in_chunks_of_ids(db, settings):
    for task_id in range(1, 6):
        add_task(db, settings, task_id, datasets=(("input", task_id, 10),))
    frame = read_task_features(db, settings, range(1, 1500))
    assert list(frame["nfiles_sum"]) == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_find_eligible_tasks(db, settings):
    add_task(db, settings, 1, status="defined", splitrule="US=2")
    add_task(db, settings, 2, status="ready", splitrule="PC=1, US=2")
    add_task(db, settings, 3, status="running", splitrule="US=2")
    add_task(db, settings, 4, status="defined", splitrule="TI=1")
    add_task(db, settings, 5, status="defined", splitrule="XUS=1")
    add_task(db, settings, 6, status="ready", splitrule=None)
    add_task(db, settings, 7, status="defined", splitrule="US=2")
    add_task(db, settings, 8, status="defined", splitrule="US=2")
    add_task(db, settings, 9, status="ready", splitrule="US=,PC=1")
    add_task(db, settings, 10, status="ready", splitrule="TI=1,US=3,MF=2")
    write_predictions(db, settings, [make_prediction(7, "kept_scouts")])

    with db.begin() as conn:
        assert find_eligible_tasks(conn, settings, limit=10) == [1, 2, 8]
        assert find_eligible_tasks(conn, settings, limit=2) == [1, 2]
        assert find_eligible_tasks(conn, settings, limit=10, task_ids=[2, 3, 8]) == [
            2,
            8,
        ]
        assert find_eligible_tasks(conn, settings, limit=10, task_ids=[]) == []
        assert find_eligible_tasks(conn, settings, limit=10, lock=True) == [1, 2, 8]


@pytest.mark.postgres
def test_locked_tasks_are_skipped_by_a_second_hook(pg_schema, tmp_path):
    from conftest import POSTGRES_URL

    settings = load_settings(home=tmp_path, db_url=POSTGRES_URL, db_schema=pg_schema)
    pg = make_engine(settings)
    try:
        init_database(pg, settings, with_panda_tables=True)
        for task_id in (1, 2, 3):
            add_task(pg, settings, task_id)
        with pg.connect() as first, pg.connect() as second, first.begin():
            assert find_eligible_tasks(first, settings, limit=2, lock=True) == [1, 2]
            with second.begin():
                assert find_eligible_tasks(second, settings, limit=5, lock=True) == [3]
    finally:
        pg.dispose()


def test_find_eligible_tasks_refuses_a_bad_limit(db, settings):
    with db.connect() as conn, pytest.raises(ValueError, match="'limit' field"):
        find_eligible_tasks(conn, settings, limit=0)


def test_iter_history_streams_tasks_with_their_jobs(db, settings):
    for task_id in range(1, 6):
        add_task(db, settings, task_id, datasets=(("input", 1, 100),), jobs=task_id)
    add_task(db, settings, 40, jobs=0)

    chunks = list(iter_history(db, settings, chunk_size=2))

    assert [list(tasks["jeditaskid"]) for tasks, _ in chunks] == [
        [1, 2],
        [3, 4],
        [5, 40],
    ]
    for tasks, jobs in chunks:
        assert set(jobs["jeditaskid"]) <= set(tasks["jeditaskid"])
        assert jobs["maxpss"].dtype == "float64"
    all_jobs = pd.concat([jobs for _, jobs in chunks])
    assert len(all_jobs) == 15
    assert all_jobs.groupby("jeditaskid").size().to_dict() == {
        t: t for t in range(1, 6)
    }


def test_iter_history_filters_by_creation_date(db, settings):
    for task_id in range(1, 8):  # created 2025-01-02 ... 2025-01-08
        add_task(db, settings, task_id, jobs=1)
    chunks = list(
        iter_history(
            db,
            settings,
            chunk_size=2,
            since=datetime(2025, 1, 3),
            until=datetime(2025, 1, 6),
        )
    )
    tasks = pd.concat([t for t, _ in chunks])
    jobs = pd.concat([j for _, j in chunks])
    assert list(tasks["jeditaskid"]) == [2, 3, 4]
    assert sorted(jobs["jeditaskid"]) == [2, 3, 4]


@pytest.mark.parametrize(
    ("reader", "match"),
    [
        pytest.param(
            lambda bind, settings: read_task_features(bind, settings, [1]),
            r"table is missing.*db init",
            id="features-missing-table",
        ),
        pytest.param(
            lambda bind, settings: list(iter_history(bind, settings, chunk_size=0)),
            r"'chunk_size' field must be a positive integer\. Got 0",
            id="bad-chunk-size",
        ),
    ],
)
def test_reader_errors(engine, settings, reader, match):
    with pytest.raises((DatabaseError, ValueError), match=match):
        reader(engine, settings)


def test_reader_error_is_one_line(engine, settings):
    with pytest.raises(DatabaseError) as caught:
        read_task_features(engine, settings, [1])
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value.__cause__, sa.exc.SQLAlchemyError)
