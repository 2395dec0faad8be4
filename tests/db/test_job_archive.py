"""A task's jobs from JOBSARCHIVED4 UNION JOBSARCHIVED, as PanDA reads its scouts."""

from __future__ import annotations

import sqlalchemy as sa

from panda_predictor.db.engine import get_panda_tables
from panda_predictor.db.job_archive import archive_exists, job_rows


def _pandaids(db, query) -> list[int]:
    with db.connect() as conn:
        return sorted(conn.execute(sa.select(query.c.pandaid)).scalars())


def test_archived_jobs_join_the_live_ones_and_a_copy_counts_once(db, settings):
    tables = get_panda_tables(settings, db)
    assert archive_exists(db, tables)
    with db.begin() as conn:
        live = [
            {"pandaid": p, "jeditaskid": 5, "jobstatus": "finished"} for p in (1, 2)
        ]
        conn.execute(sa.insert(tables.jobsarchived4), live)
        old = [
            {"pandaid": 2, "jeditaskid": 5, "jobstatus": "finished"},  # also live
            {"pandaid": 3, "jeditaskid": 5, "jobstatus": "finished"},
            {"pandaid": 4, "jeditaskid": 6, "jobstatus": "finished"},  # other task
        ]
        conn.execute(sa.insert(tables.jobsarchived), old)

    def task_5(table):
        return [table.c.jeditaskid == 5]

    columns = ["pandaid", "jeditaskid", "jobstatus"]
    assert _pandaids(db, job_rows(tables, True, task_5, columns)) == [1, 2, 3]
    assert _pandaids(db, job_rows(tables, False, task_5, columns)) == [1, 2]


def test_a_database_without_the_archive_says_so(engine, settings):
    assert not archive_exists(engine, get_panda_tables(settings, engine))
