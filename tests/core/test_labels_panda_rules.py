"""Each rule of getScoutJobData_JEDI on hand-made jobs, worked by hand, in every engine.

The engines: the per-task reference (``tests/labels_reference.py``), ``labels_frame``
(pandas), SQL on a real PostgreSQL (``labels_from_db``) and Spark local mode
(``spark_labels`` on Parquet files). Every test asserts the same hand-computed
PanDA values in all four.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import POSTGRES_URL

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.label_values import DEFAULT_LABEL_PARAMS, LabelParams
from panda_predictor.core.labels import labels_frame
from tests.core.test_labels import TASK, _job, load_history
from tests.labels_reference import task_labels

pytestmark = [
    # py4j leaves its gateway sockets to the garbage collector.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

#: Integer columns: nullable Int64, so the same rows reach SQL, Parquet and pandas.
_INTEGERS = (
    "jeditaskid", "pandaid", "corecount", "actualcorecount", "nevents", "maxpss",
    "inputfilebytes", "outputfilebytes", "hs06sec", "cpuconsumptiontime",
    "baseramcount", "cpuefficiency", "basewalltime",
)  # fmt: skip


@pytest.fixture(
    params=[
        "reference",
        "frame",
        pytest.param("sql", marks=pytest.mark.postgres),
        pytest.param("spark", marks=pytest.mark.spark),
    ]
)
def engine(request, tmp_path):
    """Return a function ``(tasks, jobs, params) -> {jeditaskid: labels}``.

    The labels of a task: ``{name: (value, unit) or None}`` for PanDA's pairs and
    ``{name + "_norm": float}`` for the normalised labels.
    """
    kind = request.param

    def run(tasks, jobs, params=DEFAULT_LABEL_PARAMS):
        jobs = [{"pandaid": i + 1, **job} for i, job in enumerate(jobs)]
        if kind == "reference":
            return {
                task["jeditaskid"]: _from_reference(
                    task_labels(
                        [j for j in jobs if j["jeditaskid"] == task["jeditaskid"]],
                        task,
                        params,
                    )
                )
                for task in tasks
            }
        task_frame, job_frame = _frame(tasks), _frame(jobs)
        if kind == "frame":
            return _from_frame(labels_frame(job_frame, task_frame, params))
        if kind == "sql":
            return _from_frame(
                _sql_labels(request, tmp_path, task_frame, job_frame, params)
            )
        return _from_frame(
            _spark_labels(request, tmp_path, task_frame, job_frame, params)
        )

    return run


def _frame(records: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(records)
    for column in _INTEGERS:
        if column in frame:
            frame[column] = pd.array(
                [None if v is None or pd.isna(v) else int(v) for v in frame[column]],
                dtype="Int64",
            )
    return frame


def _from_reference(labels) -> dict:
    out = dict(labels.panda)
    for name in TARGET_NAMES:
        out[f"{name}_norm"] = getattr(labels, name)
    return out


def _from_frame(frame: pd.DataFrame) -> dict:
    out = {}
    for row in frame.to_dict("records"):
        labels = {}
        for name in TARGET_NAMES:
            value, unit = row[f"{name}_value"], row[f"{name}_unit"]
            unit = None if unit is None or pd.isna(unit) else unit
            labels[name] = None if pd.isna(value) else (int(value), unit)
            labels[f"{name}_norm"] = float(row[name])
        out[int(row["jeditaskid"])] = labels
    return out


def _sql_labels(request, tmp_path, tasks, jobs, params) -> pd.DataFrame:
    from panda_predictor.db.engine import get_panda_tables, make_engine
    from panda_predictor.db.labels_sql import labels_from_db
    from panda_predictor.settings import load_settings

    schema = request.getfixturevalue("pg_schema")
    settings = load_settings(home=tmp_path, db_url=POSTGRES_URL, db_schema=schema)
    load_history(settings, tasks, jobs)
    bind = make_engine(settings)
    try:
        tables = get_panda_tables(settings, bind)
        return labels_from_db(bind, tables, tasks["jeditaskid"].tolist(), params)
    finally:
        bind.dispose()


def _spark_labels(request, tmp_path, tasks, jobs, params) -> pd.DataFrame:
    from pipelines.labels.spark import spark_labels

    spark = request.getfixturevalue("spark")
    for name, frame in (("jedi_tasks", tasks), ("jobsarchived4", jobs)):
        (tmp_path / name).mkdir()
        frame.to_parquet(tmp_path / name / "part-0.parquet", index=False)
    return spark_labels(spark, tmp_path, params)


def _task(jeditaskid: int, **overrides) -> dict:
    return {
        **TASK,
        "jeditaskid": jeditaskid,
        "ramunit": "MBPerCore",
        "cputimeunit": "HS06sPerEvent",
        **overrides,
    }


def _scout(jeditaskid: int, **overrides) -> dict:
    return _job(**{"jeditaskid": jeditaskid, "actualcorecount": None, **overrides})


def test_ramcount_is_rounded_down_and_below_zero_becomes_one(engine):
    tasks = [
        _task(1),
        _task(2, baseramcount=2000),
        _task(3, baseramcount=0),
    ]
    jobs = [
        # per core (pss - 1,024,000) / 2: 988,000 1,088,000 1,188,000 1,488,000 kB;
        # p75 at index 2.25: 1,263,000; * 110 // 100 = 1,389,300; / 1024 = 1356.7
        *(_scout(1, maxpss=p) for p in (3_000_000, 3_200_000, 3_400_000, 4_000_000)),
        # (1,000,000 - 2,048,000) / 1 = -1,048,000; * 110 // 100 = -1,152,800;
        # / 1024 = -1125.8; int() = -1125 < 0 -> 1
        _scout(2, maxpss=1_000_000, corecount=1),
        # 1,000,000 * 110 // 100 = 1,100,000; / 1024 = 1074.2 (rounded up: 1075)
        _scout(3, maxpss=1_000_000, corecount=1),
    ]
    labels = engine(tasks, jobs)
    assert labels[1]["ramcount"] == (1356, "MBPerCore")
    assert labels[1]["ramcount_norm"] == 1356.0
    assert labels[2]["ramcount"] == (1, "MBPerCore")
    assert labels[3]["ramcount"] == (1074, "MBPerCore")


def test_ramcount_min_replaces_a_smaller_value(engine):
    tasks = [_task(1), _task(2, baseramcount=0)]
    jobs = [
        _scout(1, maxpss=1_100_000),  # (1,100,000 - 1,024,000) / 2 -> 40 MBPerCore
        _scout(2, maxpss=4_000_000, corecount=1),  # 4296 MBPerCore, above the floor
    ]
    labels = engine(tasks, jobs, LabelParams(min_ramcount=2000))
    assert labels[1]["ramcount"] == (2000, "MBPerCore")
    assert labels[2]["ramcount"] == (4296, "MBPerCore")


def test_cores_come_from_actualcorecount_then_corecount_then_one(engine):
    tasks = [
        _task(10, corecount=8, baseramcount=0),
        _task(11, corecount=8, baseramcount=0),
        _task(12, corecount=8, baseramcount=0),
    ]
    jobs = [
        # 4 actual cores of 8 defined: 4,096,000 / 4 = 1,024,000 kB per core
        _scout(10, corecount=8, actualcorecount=4, maxpss=4_096_000, hs06sec=None),
        # no ACTUALCORECOUNT: the job's CORECOUNT, 2
        _scout(11, corecount=2, maxpss=2_048_000),
        # neither: 1 core (the task's CORECOUNT 8 is not PanDA's fallback)
        _scout(12, corecount=None, maxpss=1_024_000),
    ]
    labels = engine(tasks, jobs)
    # 1,024,000 * 110 // 100 = 1,126,400; / 1024 = 1100 for all three
    assert [labels[t]["ramcount"] for t in (10, 11, 12)] == [(1100, "MBPerCore")] * 3
    # cputime with 4 cores at 10 HS06: (3600 - 600) * 10 * 4 * 0.9 / 100 events
    # = 1080; * 1.5 = 1620 (with the 8 defined cores: 3240)
    assert labels[10]["cputime"] == (1620, "HS06sPerEvent")


def test_ramcount_unit_mb_raw_maxpss_and_fixed_not_measured(engine):
    tasks = [
        _task(20, ramunit="MB"),
        _task(21, ramunit=None),
        _task(22, ramunit="MBPerCoreFixed"),
        _task(23, baseramcount=0),
    ]
    pss = (2_000_000, 3_000_000)
    jobs = [
        # raw maxPSS, neither per core nor less baseRamCount: p75 of 2,000,000 and
        # 3,000,000 = 2,750,000; * 110 // 100 = 3,025,000; / 1024 = 2954.1 -> 2954 MB
        *(_scout(20, corecount=4, maxpss=p) for p in pss),
        *(_scout(21, corecount=4, maxpss=p) for p in pss),
        *(_scout(22, corecount=4, maxpss=p) for p in pss),
        # maxPSS 0 and NULL are skipped: only 4,096,000 / 4 -> 1100 MBPerCore
        _scout(23, corecount=4, maxpss=0),
        _scout(23, corecount=4, maxpss=None),
        _scout(23, corecount=4, maxpss=4_096_000),
    ]
    labels = engine(tasks, jobs)
    for task in (20, 21):
        assert labels[task]["ramcount"] == (2954, "MB")
        assert math.isnan(labels[task]["ramcount_norm"])  # the model's unit: per core
    assert labels[22]["ramcount"] is None and math.isnan(labels[22]["ramcount_norm"])
    assert labels[22]["cputime"] == (810, "HS06sPerEvent")  # the rest is measured
    assert labels[23]["ramcount"] == (1100, "MBPerCore")


def test_cputime_unit_stays_null_when_the_task_gave_none(engine):
    tasks = [
        _task(30, cputimeunit=None),
        _task(31, cputimeunit="HS06sPerEvent"),
        _task(32, cputimeunit="mHS06sPerEvent"),
        _task(33, cputimeunit=None),
    ]
    # (3600 - 600) s * 10 HS06 * 2 cores * 0.9 / 100 events = 540; * 1.5 = 810
    jobs = [_scout(t) for t in (30, 31, 32)] + [_scout(33, nevents=100_000)]
    labels = engine(tasks, jobs)
    assert labels[30]["cputime"] == (810, None)
    assert labels[31]["cputime"] == (810, "HS06sPerEvent")
    assert labels[32]["cputime"] == (810, "HS06sPerEvent")
    assert labels[33]["cputime"] == (810, "mHS06sPerEvent")  # 0.81 * 1000
    assert [labels[t]["cputime_norm"] for t in (30, 31, 32)] == [810.0] * 3
    assert labels[33]["cputime_norm"] == pytest.approx(0.81)


def test_core_power_from_hs06sec_else_10(engine):
    tasks = [_task(40), _task(41), _task(42)]
    jobs = [
        # HS06SEC / (3600 s * 2 cores) = 20 HS06 per core: 3000 * 20 * 2 * 0.9 / 100
        # = 1080; * 1.5 = 1620
        _scout(40, hs06sec=3600 * 2 * 20),
        _scout(41, hs06sec=None),  # 10 HS06: 810
        _scout(42, hs06sec=0),  # 10 HS06: 810
    ]
    labels = engine(tasks, jobs)
    assert [labels[t]["cputime"][0] for t in (40, 41, 42)] == [1620, 810, 810]
