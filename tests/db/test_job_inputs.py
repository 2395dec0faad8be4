"""A job's master input size and events from JEDI_DATASET_CONTENTS, in SQL."""

from __future__ import annotations

import sqlalchemy as sa

from panda_predictor.core.labels import INPUT_COLUMNS
from panda_predictor.db.engine import dialect_of, get_panda_tables
from panda_predictor.db.job_archive import job_rows
from panda_predictor.db.job_inputs import contents_exist, inputs_per_job, with_inputs

MB = 1024 * 1024


def _file(fileid, pandaid, datasetid=10, **fields):
    row = {
        "jeditaskid": 5,
        "datasetid": datasetid,
        "fileid": fileid,
        "type": "input",
        "status": "finished",
        "fsize": 4 * MB,
        "nevents": 100,
        "startevent": None,
        "endevent": None,
        "pandaid": pandaid,
    }
    return row | fields


def test_inputs_follow_panda_s_effective_size_and_events(db, settings):
    tables = get_panda_tables(settings, db)
    assert contents_exist(db, tables)
    with db.begin() as conn:
        conn.execute(
            sa.insert(tables.jedi_datasets),
            [
                {"jeditaskid": 5, "datasetid": 10, "type": "input", "masterid": None},
                {"jeditaskid": 5, "datasetid": 11, "type": "input", "masterid": 10},
            ],
        )
        conn.execute(
            sa.insert(tables.jedi_dataset_contents),
            [
                _file(1, 100),  # 4 MB, 100 events
                _file(2, 100, fsize=0, nevents=None),  # counts 1 MB and 1 event
                _file(3, 100, datasetid=11),  # secondary dataset: not counted
                _file(4, 100, status="failed"),  # not finished: not counted
                _file(5, 200, startevent=0, endevent=49),  # half the file's events
                _file(6, 200, type="pseudo_input", fsize=None),
            ],
        )
        conn.execute(
            sa.insert(tables.jobsarchived4),
            [{"pandaid": p, "jeditaskid": 5} for p in (100, 200, 300)],
        )

    def task_5(table):
        return [table.c.jeditaskid == 5]

    inputs = inputs_per_job(tables, dialect_of(db), task_5)
    jobs = job_rows(tables, False, task_5, ["pandaid", "jeditaskid"]).alias("j")
    with db.connect() as conn:
        rows = conn.execute(with_inputs(jobs, inputs).order_by(jobs.c.pandaid))
        found = {r.pandaid: tuple(r._mapping[c] for c in INPUT_COLUMNS) for r in rows}
        no_table = conn.execute(with_inputs(jobs, None)).mappings().first()

    assert found[100] == (5.0, 101.0, 0)
    # 2 MB of the range + 1 MB for a size unknown; the range's 50 events + 100.
    assert found[200] == (3.0, 150.0, 1)
    assert found[300] == (None, None, None)  # no files: the job's own values count
    assert [no_table[c] for c in INPUT_COLUMNS] == [None, None, None]


def test_a_database_without_contents_says_so(engine, settings):
    assert not contents_exist(engine, get_panda_tables(settings, engine))
