"""Labels from scout jobs: hand-computed formulas and per-task == vectorised.

The per-task side is the plain-Python reference in ``tests/labels_reference.py``.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.label_values import LABEL_COLUMNS, LabelParams
from panda_predictor.core.labels import group_quantile, labels_frame
from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.migrations import init_database
from tests.labels_reference import task_labels

T0 = datetime(2025, 3, 1, 12, 0, 0)
MB = 1024 * 1024


def make_history(seed: int, n_tasks: int = 60) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return small random (tasks, jobs) frames with every awkward case PanDA shows.

    Scouts and non-scouts, unfinished jobs, missing values (NULL maxPSS, HS06SEC,
    nEvents, task defaults), zero-length jobs, jobs longer than 6 h, tasks without any
    scout and jobs of unknown tasks.
    """
    rng = np.random.default_rng(seed)
    task_ids = np.arange(1000, 1000 + n_tasks, dtype=np.int64)
    cores = rng.choice([1, 8, None], n_tasks, p=[0.5, 0.4, 0.1])
    tasks = pd.DataFrame(
        {
            "jeditaskid": task_ids,
            "corecount": pd.array(cores, dtype="Int64"),
            "baseramcount": pd.array(
                rng.choice([0, 500, 1000, None], n_tasks), dtype="Int64"
            ),
            "cpuefficiency": pd.array(
                rng.choice([90, 70, None], n_tasks), dtype="Int64"
            ),
            "basewalltime": pd.array(
                rng.choice([600, 300, None], n_tasks), dtype="Int64"
            ),
            "ramunit": rng.choice(
                ["MBPerCore", "MB", None, "MBPerCoreFixed"],
                n_tasks,
                p=[0.7, 0.1, 0.1, 0.1],
            ),
            "cputimeunit": rng.choice(
                ["HS06sPerEvent", "mHS06sPerEvent", None], n_tasks, p=[0.6, 0.2, 0.2]
            ),
        }
    )
    rows = []
    pandaid = 1
    for tid, core in zip(task_ids, cores, strict=True):
        for _ in range(rng.integers(0, 14)):
            job_cores = core if rng.random() < 0.9 else rng.choice([None, 0, 4])
            duration = float(
                rng.choice(
                    [0, rng.uniform(60, 20000), rng.uniform(22000, 50000)],
                    p=[0.05, 0.8, 0.15],
                )
            )
            start = T0 + timedelta(seconds=float(rng.uniform(0, 86400)))
            rows.append(
                {
                    "pandaid": pandaid,
                    "jeditaskid": int(tid) if rng.random() > 0.02 else 99,
                    "jobstatus": rng.choice(["finished", "failed"], p=[0.85, 0.15]),
                    "specialhandling": rng.choice(
                        ["sj", "ddm:rucio,sj", "ddm:rucio", None, "sjx"],
                        p=[0.5, 0.2, 0.15, 0.1, 0.05],
                    ),
                    "corecount": job_cores,
                    "actualcorecount": rng.choice(
                        [None, job_cores, 0, 2], p=[0.3, 0.5, 0.05, 0.15]
                    ),
                    "nevents": rng.choice(
                        [None, 5, 50, 500, 5000, 500_000],
                        p=[0.05, 0.15, 0.3, 0.3, 0.1, 0.1],
                    ),
                    "starttime": start,
                    "endtime": start + timedelta(seconds=duration),
                    # NUMERIC(20) in PanDA: whole seconds.
                    "cpuconsumptiontime": float(round(rng.uniform(100, 30000))),
                    "maxpss": rng.choice(
                        [None, int(rng.uniform(5e5, 8e6))], p=[0.05, 0.95]
                    ),
                    "inputfilebytes": int(rng.uniform(0, 5e9)),
                    "outputfilebytes": rng.choice(
                        [None, int(rng.uniform(0, 2e9))], p=[0.1, 0.9]
                    ),
                    "hs06sec": rng.choice(
                        [None, int(duration * rng.uniform(8, 15))], p=[0.2, 0.8]
                    ),
                }
            )
            pandaid += 1
    jobs = pd.DataFrame(rows)
    numbers = ("corecount", "actualcorecount", "nevents", "maxpss")
    for column in (*numbers, "outputfilebytes", "hs06sec"):
        jobs[column] = pd.array(jobs[column], dtype="Int64")
    return tasks, jobs


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def load_history(settings, tasks: pd.DataFrame, jobs: pd.DataFrame) -> None:
    """Create PanDA's tables from sql/ and insert the given rows."""
    engine = make_engine(settings)
    try:
        init_database(engine, settings, with_panda_tables=True)
        tables = get_panda_tables(settings, engine)
        with engine.begin() as conn:
            for table, frame in (
                (tables.jedi_tasks, tasks),
                (tables.jobsarchived4, jobs),
            ):
                if len(frame):
                    conn.execute(table.insert(), _records(frame))
    finally:
        engine.dispose()


def _job(**overrides) -> dict:
    job = {
        "jeditaskid": 1,
        "jobstatus": "finished",
        "specialhandling": "sj",
        "corecount": 2,
        "nevents": 100,
        "starttime": T0,
        "endtime": T0 + timedelta(seconds=3600),
        "cpuconsumptiontime": 1000,
        "maxpss": 2_000_000,
        "inputfilebytes": 1_024_000,
        "outputfilebytes": 1_024_000,
        "hs06sec": 3600 * 2 * 10,
    }
    job.update(overrides)
    return job


TASK = {
    "jeditaskid": 1,
    "corecount": 2,
    "baseramcount": 1000,
    "cpuefficiency": 90,
    "basewalltime": 600,
}


def test_ramcount_subtracts_base_ram_per_core_takes_p75_with_margin_rounds_down():
    pss = [3_000_000, 3_200_000, 3_400_000, 4_000_000]
    labels = task_labels([_job(maxpss=p) for p in pss], TASK)
    # per job (pss - 1000*1024)/2 = 988000, 1088000, 1188000, 1488000 kB
    # p75: index 2.25 -> 1188000 + 0.25*300000 = 1263000; *110//100 = 1389300;
    # /1024 = 1356.7 -> int() -> 1356 (PanDA rounds down)
    assert labels.ramcount == 1356
    assert labels.panda["ramcount"] == (1356, "MBPerCore")


def test_ramcount_floor_applies():
    labels = task_labels([_job(maxpss=1_100_000)], TASK, LabelParams(min_ramcount=2000))
    assert labels.ramcount == 2000


def test_cputime_in_hs06s_per_event():
    # (3600 - 600) s * 10 HS06 * 2 cores * 0.9 / 100 events = 540; *1.5 = 810
    labels = task_labels([_job()], TASK)
    assert labels.cputime == 810
    assert labels.panda["cputime"] == (810, "HS06sPerEvent")


def test_cputime_below_10_switches_to_milli_unit():
    labels = task_labels([_job(nevents=100_000)], TASK)  # 0.54 * 1.5 = 0.81
    assert labels.panda["cputime"] == (810, "mHS06sPerEvent")
    assert labels.cputime == pytest.approx(0.81)


def test_cputime_uses_p95_with_linear_interpolation():
    jobs = [_job(nevents=n) for n in (100, 200, 300, 400, 500)]
    per_job = sorted(3000 * 10 * 2 * 0.9 / n for n in (100, 200, 300, 400, 500))
    expected = math.ceil(float(np.quantile(per_job, 0.95)) * 1.5)
    # p95 over 5 values: index 3.8 -> between the two largest
    assert expected == math.ceil((per_job[3] + 0.8 * (per_job[4] - per_job[3])) * 1.5)
    assert task_labels(jobs, TASK).panda["cputime"] == (expected, "HS06sPerEvent")


@pytest.mark.parametrize(
    ("nevents", "hours", "counted"),
    [
        pytest.param(20, 1, True, id="nevents-equal-10x-cores"),
        pytest.param(19, 1, False, id="too-few-events"),
        pytest.param(19, 6.5, True, id="too-few-events-but-longer-than-6h"),
        pytest.param(19, 6.0, False, id="exactly-6h-not-longer"),
    ],
)
def test_cputime_event_filter_and_long_job_exception(nevents, hours, counted):
    job = _job(nevents=nevents, endtime=T0 + timedelta(hours=hours), hs06sec=None)
    labels = task_labels([job], TASK)
    assert (not math.isnan(labels.cputime)) is counted
    assert (labels.panda["cputime"] is not None) is counted
    assert not math.isnan(labels.ramcount)


def test_core_power_defaults_to_10_without_hs06sec():
    assert task_labels([_job(hs06sec=None)], TASK).cputime == 810
    # a site twice as fast doubles the HS06 seconds
    assert task_labels([_job(hs06sec=3600 * 2 * 20)], TASK).cputime == 1620


@pytest.mark.parametrize(
    ("cpu_s", "expected"),
    [
        pytest.param(3599, 0, id="below-3600s-is-zero"),
        pytest.param(7200, 5400, id="per-input-MB-with-margin"),
    ],
)
def test_walltime(cpu_s, expected):
    jobs = [
        _job(cpuconsumptiontime=cpu_s, inputfilebytes=2 * MB),
        _job(cpuconsumptiontime=100, inputfilebytes=1 * MB),
    ]
    labels = task_labels(jobs, TASK)
    assert labels.walltime == expected
    assert labels.panda["walltime"] == (expected, "kSI2kseconds")


def test_iointensity_is_max_rate_per_core_rounded_up():
    jobs = [
        _job(endtime=T0 + timedelta(seconds=100)),  # 2000 kB / 100 s / 2 = 10
        _job(endtime=T0 + timedelta(seconds=300)),  # 3.33
        _job(
            inputfilebytes=1_024_000,
            outputfilebytes=None,
            endtime=T0 + timedelta(seconds=30),
        ),  # 1000 / 30 / 2 = 16.7
    ]
    assert task_labels(jobs, TASK).panda["iointensity"] == (17, "kBPerS")


def test_only_finished_scouts_count_and_known_at_is_last_scout_end():
    jobs = [
        _job(maxpss=4_000_000, endtime=T0 + timedelta(hours=2)),
        _job(maxpss=9_000_000, specialhandling="ddm:rucio"),
        _job(maxpss=9_000_000, jobstatus="failed"),
        _job(maxpss=9_000_000, specialhandling="sjx"),
        _job(maxpss=4_000_000, specialhandling="ddm:rucio,sj"),
    ]
    labels = task_labels(jobs, TASK)
    assert labels.n_scouts == 2
    assert labels.ramcount == int((4_000_000 - 1_024_000) // 2 * 110 // 100 / 1024)
    assert labels.labels_known_at == T0 + timedelta(hours=2)


def test_no_scouts_gives_nan_and_none():
    labels = task_labels([_job(specialhandling=None)], TASK)
    assert all(
        math.isnan(v)
        for v in (labels.ramcount, labels.cputime, labels.iointensity, labels.walltime)
    )
    assert all(v is None for v in labels.panda.values())
    assert labels.n_scouts == 0
    assert labels.labels_known_at is None


def test_task_defaults_when_columns_are_null():
    task = {
        "jeditaskid": 1,
        "corecount": None,
        "baseramcount": None,
        "cpuefficiency": None,
        "basewalltime": None,
    }
    labels = task_labels([_job(corecount=None, maxpss=1_024_000)], task)
    assert labels.ramcount == 1100  # 1 core, no base: 1024000 * 110 // 100 / 1024
    # 1 core at hs06sec/3600 = 20 HS06 does the work of 2 cores at 10: same total
    assert labels.cputime == 810
    assert task_labels([_job(corecount=None, hs06sec=None)], task).cputime == 405


def test_group_quantile_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 50, 2000)
    values = rng.lognormal(5, 2, 2000)
    values[rng.random(2000) < 0.1] = np.nan
    got = group_quantile(codes, values, 52, 0.95)
    for group in range(52):
        chosen = values[(codes == group) & ~np.isnan(values)]
        expected = np.quantile(chosen, 0.95) if len(chosen) else np.nan
        np.testing.assert_equal(got[group], expected)


def test_vectorised_equals_per_task(seed):
    tasks, jobs = make_history(seed)
    # Some jobs with their files' figures (JEDI_DATASET_CONTENTS), as the reader adds.
    rng = np.random.default_rng(seed)
    has_files = rng.random(len(jobs)) < 0.4
    jobs["master_input_mb"] = np.where(has_files, rng.uniform(1, 5000, len(jobs)), None)
    jobs["master_nevents"] = np.where(has_files, rng.integers(1, 5000, len(jobs)), None)
    jobs["pseudo_input"] = np.where(has_files, rng.integers(0, 2, len(jobs)), None)
    frame = labels_frame(jobs, tasks)
    assert list(frame.columns) == list(LABEL_COLUMNS)
    assert len(frame) == len(tasks)
    assert (frame["n_scouts"] == 0).any() and (frame["n_scouts"] > 0).any()
    records = jobs.astype(object).where(jobs.notna(), None).to_dict("records")
    for task, row in zip(
        tasks.astype(object).where(tasks.notna(), None).to_dict("records"),
        frame.itertuples(index=False),
        strict=True,
    ):
        mine = [j for j in records if j["jeditaskid"] == task["jeditaskid"]]
        expected = task_labels(mine, task)
        assert row.n_scouts == expected.n_scouts
        for name in ("ramcount", "cputime", "iointensity", "walltime"):
            np.testing.assert_equal(getattr(row, name), getattr(expected, name))
            value = getattr(row, f"{name}_value")
            pair = (
                None if pd.isna(value) else (int(value), getattr(row, f"{name}_unit"))
            )
            assert pair == expected.panda[name], (task["jeditaskid"], name)
        if expected.labels_known_at is None:
            assert pd.isna(row.labels_known_at)
        else:
            assert row.labels_known_at == pd.Timestamp(expected.labels_known_at)


def test_labels_frame_names_missing_columns():
    tasks, jobs = make_history(1, n_tasks=3)
    with pytest.raises(
        ValueError, match=r"jobs frame must have the columns .*missing \['maxpss'\]"
    ):
        labels_frame(jobs.drop(columns="maxpss"), tasks)


def test_worked_example_of_docs_labels_md():
    def job(pss, seconds, events, hs06sec, cpu_s, gib_in):
        return _job(
            corecount=8,
            maxpss=pss,
            endtime=T0 + timedelta(seconds=seconds),
            nevents=events,
            hs06sec=hs06sec,
            cpuconsumptiontime=cpu_s,
            inputfilebytes=int(gib_in * 1024**3),
            outputfilebytes=int(gib_in * 250 * MB),
        )

    jobs = [
        job(12_000_000, 7200, 400, 7200 * 8 * 12, 50_000, 2),
        job(13_000_000, 9000, 400, None, 60_000, 2),
        job(11_000_000, 3000, 50, None, 20_000, 1),
    ]
    task = {**TASK, "corecount": 8, "cpuefficiency": None, "basewalltime": None}
    labels = task_labels(jobs, task)
    assert labels.panda == {
        "ramcount": (1540, "MBPerCore"),
        "cputime": (2262, "HS06sPerEvent"),
        "iointensity": (55, "kBPerS"),
        "walltime": (44, "kSI2kseconds"),
    }
    assert labels.labels_known_at == T0 + timedelta(seconds=9000)
