"""SWF logs of unusual shapes: no wait times, no header, few jobs, month boundaries."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.ingest import read_job_log
from panda_predictor.ingest.swf import (
    ASSUMED_WAIT_S,
    MIN_RECORDED,
    available_targets,
    read_swf,
)

# 2005-11-30 14:00:00 UTC: ten hours before December.
NOV_30_AFTERNOON = 1133359200


def swf_rows(
    n: int,
    seed: int,
    wait: int | None = None,
    cpu_every: int = 1,
    step_s: int = 600,
) -> list[str]:
    """Return ``n`` SWF job lines for 3 users; ``wait=-1`` records no wait at all.

    :param cpu_every: CPU time is recorded for every ``cpu_every``-th job only.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(1, n + 1):
        run = int(rng.integers(60, 7200))
        w = int(rng.integers(0, 900)) if wait is None else wait
        cpu = int(run * 0.9) if i % cpu_every == 0 else -1
        user = i % 3
        rows.append(
            f"{i} {(i - 1) * step_s} {w} {run} 1 {cpu} 2048 1 {run * 2} 4096 1 "
            f"{user} 1 {user + 5} 1 1 -1 -1"
        )
    return rows


def write(path, rows, header=("; Version: 2.2", "; UnixStartTime: 1132444805")):
    path.write_text("\n".join([*header, *rows, ""]))
    return path


def test_unrecorded_wait_is_assumed_and_reported(tmp_path, seed):
    rows = swf_rows(40, seed, wait=-1)
    rows.append("41 24000 -1 -1 1 -1 -1 1 100 -1 0 1 1 1 1 1 -1 -1")  # no run time
    frame, report = read_swf(write(tmp_path / "nowait.swf", rows))
    ran = frame["run_s"].notna()
    expected = frame["submit_s"] + ASSUMED_WAIT_S + frame["run_s"]
    assert np.allclose(frame.loc[ran, "finish_s"], expected[ran])
    assert frame["wait_s"].isna().all()  # the log's value, not the assumption
    assert frame["wait_assumed"].tolist() == ran.tolist()
    assert np.isnan(frame["finish_s"].iloc[-1])  # no run time: finish unknown
    assert report.n_wait_assumed == 40 and report.assumed_wait_s == 3600.0
    assert (
        "wait time not recorded for 40 jobs with a run time: assumed 3600 s, so a "
        "job's label counts as known only 1 h after its run would end if it had "
        "started at once"
    ) in report.lines()


def test_assumed_wait_is_a_keyword(tmp_path, seed):
    path = write(tmp_path / "nowait.swf", swf_rows(10, seed, wait=-1))
    frame, report = read_job_log(path, assumed_wait_s=600)
    expected = frame["submit_s"] + 600 + frame["run_s"]
    assert np.allclose(frame["finish_s"], expected)
    assert any("assumed 600 s" in x and "10 min after" in x for x in report.lines())


def test_recorded_and_set_aside_waits_are_not_assumed(tmp_path, seed):
    rows = swf_rows(5, seed)
    rows.append("6 4000 -7 50 1 40 1024 1 100 2048 1 1 1 1 1 1 -1 -1")
    frame, report = read_swf(write(tmp_path / "mixed.swf", rows))
    assert not frame["wait_assumed"].any() and report.n_wait_assumed == 0
    recorded = frame.iloc[:5]
    assert np.allclose(
        recorded["finish_s"],
        recorded["submit_s"] + recorded["wait_s"] + recorded["run_s"],
    )
    assert np.isnan(frame["finish_s"].iloc[5])  # a negative wait is not "unrecorded"
    assert not any(x.startswith("wait time not recorded") for x in report.lines())


@pytest.mark.parametrize(
    "value",
    [-1.0, float("nan"), float("inf"), "1h", True, None],
    ids=["negative", "nan", "inf", "text", "bool", "none"],
)
def test_assumed_wait_must_be_a_wait(tmp_path, seed, value):
    path = write(tmp_path / "nowait.swf", swf_rows(3, seed, wait=-1))
    with pytest.raises(ValueError, match="The 'assumed_wait_s' field must be a finite"):
        read_swf(path, assumed_wait_s=value)


def test_stripped_header_counts_from_1970(tmp_path, seed):
    frame, report = read_swf(write(tmp_path / "bare.swf", swf_rows(60, seed), ()))
    assert report.n_comments == 0 and not report.header and not report.start_known
    assert str(frame["submit_time"].iloc[0]) == "1970-01-01 00:00:00"
    assert frame["finish_s"].notna().all()
    lines = report.lines()
    assert "no header (stripped)" in lines[1]
    assert "no start date recorded, so dates count from 1970-01-01" in lines[-5]
    assert available_targets(report) == ["walltime", "cputime", "ramcount"]


def test_unreadable_start_time_counts_from_1970(tmp_path, seed):
    header = ("; UnixStartTime: yesterday",)
    frame, report = read_swf(write(tmp_path / "odd.swf", swf_rows(5, seed), header))
    assert not report.start_known and frame["submit_time"].dt.year.eq(1970).all()


def test_few_jobs_read_but_no_target_is_available(tmp_path, seed):
    frame, report = read_swf(write(tmp_path / "few.swf", swf_rows(30, seed)))
    assert len(frame) == 30 and report.n_jobs == 30
    assert available_targets(report) == []
    assert (
        f"target walltime: not available (recorded for 30 jobs, fewer than "
        f"{MIN_RECORDED})"
    ) in report.lines()
    assert "target iointensity: not available" in report.lines()


def test_target_recorded_for_few_jobs_is_not_available(tmp_path, seed):
    path = write(tmp_path / "rarecpu.swf", swf_rows(100, seed, cpu_every=10))
    frame, report = read_swf(path)
    assert frame["cpu_s"].notna().sum() == 10
    assert available_targets(report) == ["walltime", "ramcount"]
    assert (
        "target cputime: not available (recorded for 10 jobs, fewer than 50)"
        in report.lines()
    )


def test_month_boundary(tmp_path, seed):
    header = (f"; UnixStartTime: {NOV_30_AFTERNOON}",)
    rows = swf_rows(60, seed, step_s=1200)  # 20 h: crosses into December at job 31
    frame, report = read_swf(write(tmp_path / "month.swf", rows, header))
    months = frame["submit_time"].dt.month
    assert (months == 11).sum() == 30 and (months == 12).sum() == 30
    assert frame["submit_time"].is_monotonic_increasing
    assert (
        "span: 2005-11-30 14:00 .. 2005-12-01 09:40 UTC (0.8 days, 2 months)"
        in report.lines()
    )


def test_header_only_log_has_no_jobs(tmp_path):
    frame, report = read_swf(write(tmp_path / "empty.swf", []))
    assert frame.empty and report.n_jobs == 0 and report.n_wait_assumed == 0
    assert "wait_assumed" in frame.columns
    assert "span: no job with a submit time" in report.lines()
    assert available_targets(report) == []
