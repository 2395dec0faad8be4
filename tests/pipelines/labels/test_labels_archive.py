"""Jobs from JOBSARCHIVED4 UNION JOBSARCHIVED (PanDA's archive), in every engine.

``getScoutJobData_JEDI`` reads the scouts from ``jobsArchived4 UNION
ATLAS_PANDAARCH.jobsArchived``. The engines: the history reader (``build_labels``:
``iter_history`` + ``labels_frame``) on SQLite and on PostgreSQL, SQL on PostgreSQL
(``labels_from_db``), and Spark on the Parquet export of the SQLite database.
"""

from __future__ import annotations

import pandas as pd
import pytest
import sqlalchemy as sa
from label_engines import ENGINES, labels_by, sqlite_settings

from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.settings import load_settings
from pipelines.labels.build import build_labels
from tests.core.test_labels import TASK, _job

pytestmark = [
    # py4j leaves its gateway sockets to the garbage collector.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

TASKS = [
    {**TASK, "jeditaskid": 50, "baseramcount": 0, "ramunit": "MBPerCore"},
    {**TASK, "jeditaskid": 51, "baseramcount": 0, "ramunit": "MBPerCore"},
]
LIVE = [
    _job(pandaid=1, jeditaskid=50, corecount=1, maxpss=1_000_000),
    _job(pandaid=2, jeditaskid=50, corecount=1, maxpss=2_000_000),
]
ARCHIVED = [
    _job(pandaid=3, jeditaskid=50, corecount=1, maxpss=3_000_000),
    # caught in both tables while PanDA moves it: counts once (UNION, not UNION ALL)
    _job(pandaid=2, jeditaskid=50, corecount=1, maxpss=2_000_000),
    _job(pandaid=4, jeditaskid=50, specialhandling=None, maxpss=9_000_000),
    _job(pandaid=5, jeditaskid=51, corecount=1, maxpss=1_024_000),
]


def _load(settings, archived=ARCHIVED) -> None:
    engine = make_engine(settings)
    try:
        init_database(engine, settings, with_panda_tables=True)
        tables = get_panda_tables(settings, engine)
        with engine.begin() as conn:
            conn.execute(tables.jedi_tasks.insert(), TASKS)
            conn.execute(tables.jobsarchived4.insert(), LIVE)
            if archived:
                conn.execute(tables.jobsarchived.insert(), archived)
    finally:
        engine.dispose()


@pytest.fixture(params=ENGINES)
def labels_of(request, tmp_path):
    """Return the labels frame of TASKS/LIVE/ARCHIVED computed by one engine."""
    return labels_by(request, tmp_path, _load, [50, 51], "jobsarchived")


def test_scouts_come_from_jobsarchived4_union_the_archive(labels_of):
    labels = labels_of.set_index("jeditaskid")
    # task 50: maxPSS 1,000,000, 2,000,000 (once), 3,000,000 kB on 1 core; p75 at
    # index 1.5 = 2,500,000; * 110 // 100 = 2,750,000; / 1024 = 2685.5 -> 2685.
    # (JOBSARCHIVED4 alone: 1879; UNION ALL, job 2 twice: 2416 with 4 scouts)
    assert labels.loc[50, "n_scouts"] == 3
    assert labels.loc[50, "ramcount_value"] == 2685
    # task 51 has only archived jobs: 1,024,000 * 110 // 100 / 1024 = 1100
    assert labels.loc[51, "n_scouts"] == 1
    assert labels.loc[51, "ramcount_value"] == 1100


def test_without_an_archive_table_jobsarchived4_alone(tmp_path):
    settings = sqlite_settings(tmp_path)
    _load(settings, archived=[])
    engine = make_engine(settings)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE jobsarchived"))
        labels = build_labels(engine, settings, progress=False).set_index("jeditaskid")
    finally:
        engine.dispose()
    # 1,000,000 and 2,000,000: p75 at index 0.75 = 1,750,000; * 110 // 100 =
    # 1,925,000; / 1024 = 1879.9 -> 1879
    assert labels.loc[50, "ramcount_value"] == 1879
    assert labels.loc[51, "n_scouts"] == 0 and pd.isna(labels.loc[51, "ramcount"])


def test_oracle_statement_reads_the_archive_schema():
    from sqlalchemy.dialects import oracle

    from panda_predictor.db.labels_sql import label_aggregates_query
    from panda_predictor.db.tables import panda_tables

    tables = panda_tables("ATLAS_PANDA", "ATLAS_PANDAARCH")
    query = label_aggregates_query(tables, "oracle", with_archive=True)
    sql = str(query.compile(dialect=oracle.dialect()))
    assert 'FROM "ATLAS_PANDA".jobsarchived4' in sql
    assert "UNION SELECT" in sql and 'FROM "ATLAS_PANDAARCH".jobsarchived ' in sql
    assert '"ATLAS_PANDAARCH".jobsarchived.jeditaskid IN' in sql  # pruned per branch


def test_archive_schema_setting_defaults(tmp_path):
    default = load_settings(home=tmp_path)
    assert default.archive_schema_for("sqlite") is None
    assert default.archive_schema_for("oracle") == "ATLAS_PANDAARCH"
    assert default.archive_schema_for("postgresql") == "doma_pandaarch"
    beside = load_settings(home=tmp_path, db_schema="s")
    assert beside.archive_schema_for("postgresql") == "s"
    explicit = load_settings(home=tmp_path, db_schema="s", db_archive_schema="")
    assert explicit.archive_schema_for("postgresql") is None
