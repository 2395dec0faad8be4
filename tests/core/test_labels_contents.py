"""Events and master input size from JEDI_DATASET_CONTENTS, pseudo_input, every engine.

``getScoutJobData_JEDI`` takes a scout's events and input size from its finished
files of the master input datasets (``CoreUtils.getEffectiveNumEvents`` and
``getEffectiveFileSize``), lets a job with a ``pseudo_input`` file count for cpuTime
whatever its events, and divides walltime and ioIntensity by that master input only.
The engines: the history reader (``build_labels``) on SQLite and on PostgreSQL, SQL
on PostgreSQL (``labels_from_db``), and Spark on the Parquet export of SQLite.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from label_engines import ENGINES, labels_by

from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.migrations import init_database
from tests.core.test_labels import MB, T0, TASK, _job

pytestmark = [
    # py4j leaves its gateway sockets to the garbage collector.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

TASKS = [
    {**TASK, "jeditaskid": t, "ramunit": "MBPerCore", "cputimeunit": "HS06sPerEvent"}
    for t in (60, 61, 62, 63)
]
JOBS = [
    # 1 h, 2 cores, 10 HS06 (no HS06SEC), its own NEVENTS 100 and 1,024,000 bytes in
    _job(pandaid=11, jeditaskid=60, hs06sec=None, cpuconsumptiontime=7200),
    _job(
        pandaid=12,
        jeditaskid=61,
        corecount=1,
        endtime=T0 + timedelta(seconds=100),
        outputfilebytes=0,
    ),
    _job(pandaid=13, jeditaskid=62, nevents=5, hs06sec=None),
    _job(pandaid=14, jeditaskid=63, hs06sec=None, cpuconsumptiontime=7200,
         inputfilebytes=2 * MB),
]  # fmt: skip
DATASETS = [
    {"jeditaskid": 60, "datasetid": 1, "type": "input", "masterid": None},
    {"jeditaskid": 60, "datasetid": 2, "type": "input", "masterid": 1},  # secondary
    {"jeditaskid": 61, "datasetid": 1, "type": "input", "masterid": None},
    {"jeditaskid": 62, "datasetid": 3, "type": "pseudo_input", "masterid": None},
]


def _file(
    task,
    dataset,
    fileid,
    pandaid,
    fsize,
    nevents=None,
    start=None,
    end=None,
    status="finished",
    kind="input",
):
    return {
        "jeditaskid": task, "datasetid": dataset, "fileid": fileid, "type": kind,
        "status": status, "fsize": fsize, "nevents": nevents, "startevent": start,
        "endevent": end, "pandaid": pandaid,
    }  # fmt: skip


FILES = [
    # events 0..499 of a 2 MiB file of 1000 events: int(2 MiB * 500 / 1000) = 1 MiB
    _file(60, 1, 1, 11, 2 * MB, nevents=1000, start=0, end=499),
    _file(60, 1, 2, 11, 3 * MB, nevents=300),  # whole file: 3 MiB, 300 events
    _file(60, 2, 3, 11, 100 * MB, nevents=5000),  # secondary dataset: not counted
    _file(60, 1, 4, 11, 50 * MB, nevents=9000, status="ready"),  # not finished
    _file(61, 1, 5, 12, 10 * MB, nevents=100),
    # a pseudo_input file without size or events: 1 MB and 1 event
    _file(62, 3, 6, 13, None, kind="pseudo_input"),
]


def _load(settings) -> None:
    engine = make_engine(settings)
    try:
        init_database(engine, settings, with_panda_tables=True)
        tables = get_panda_tables(settings, engine)
        with engine.begin() as conn:
            conn.execute(tables.jedi_tasks.insert(), TASKS)
            conn.execute(tables.jobsarchived4.insert(), JOBS)
            conn.execute(tables.jedi_datasets.insert(), DATASETS)
            conn.execute(tables.jedi_dataset_contents.insert(), FILES)
    finally:
        engine.dispose()


@pytest.fixture(params=ENGINES)
def labels(request, tmp_path):
    """Return the labels of TASKS (indexed by jeditaskid) computed by one engine."""
    ids = [t["jeditaskid"] for t in TASKS]
    frame = labels_by(request, tmp_path, _load, ids, "jedi_dataset_contents")
    return frame.set_index("jeditaskid")


def _pair(labels, task, name):
    return (int(labels.loc[task, f"{name}_value"]), labels.loc[task, f"{name}_unit"])


def test_events_come_from_the_master_input_files(labels):
    # 500 + 300 events (the secondary and the unfinished file do not count):
    # (3600 - 600) s * 10 HS06 * 2 cores * 0.9 / 800 = 67.5; * 1.5 = 101.25 -> 102
    # (with the job's own NEVENTS 100: 810)
    assert _pair(labels, 60, "cputime") == (102, "HS06sPerEvent")


def test_walltime_divides_by_the_master_input_only(labels):
    # 1 MiB + 3 MiB = 4 MB of master input: 7200 s / 4 * 1.5 = 2700
    # (with the job's INPUTFILEBYTES, 0.98 MB: 11060)
    assert _pair(labels, 60, "walltime") == (2700, "kSI2kseconds")


def test_iointensity_divides_by_the_master_input_only(labels):
    # 10 MiB = 10240 kB in, 0 out, over 100 s on 1 core: 102.4 -> 103
    # (with the job's INPUTFILEBYTES, 1000 kB: 10)
    assert _pair(labels, 61, "iointensity") == (103, "kBPerS")


def test_a_pseudo_input_job_counts_for_cputime_whatever_its_events(labels):
    # 1 event (< 10 x 2 cores, yet counted): 3000 * 10 * 2 * 0.9 / 1 = 54000; * 1.5
    assert _pair(labels, 62, "cputime") == (81000, "HS06sPerEvent")


def test_a_job_without_files_keeps_its_own_events_and_bytes(labels):
    # NEVENTS 100: 540 * 1.5 = 810; INPUTFILEBYTES 2 MiB: 7200 / 2 * 1.5 = 5400
    assert _pair(labels, 63, "cputime") == (810, "HS06sPerEvent")
    assert _pair(labels, 63, "walltime") == (5400, "kSI2kseconds")
