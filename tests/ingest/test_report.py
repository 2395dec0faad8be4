"""What a job-log reader reports: values set aside, the assumed wait, the targets."""

from __future__ import annotations

from collections import Counter

import pandas as pd

from panda_predictor.ingest.frame import MIN_RECORDED, TRACE_TARGETS
from panda_predictor.ingest.report import JobLogReport, available_targets


def test_a_summary_says_what_was_set_aside_assumed_and_recorded():
    first, *others = TRACE_TARGETS
    report = JobLogReport(
        path="log.swf",
        n_jobs=120,
        negative=Counter({"run_time": 2}),
        absurd=Counter({"used_memory_kb": 1, "run_time": 3}),
        n_wait_assumed=1500,
        assumed_wait_s=7200,
        first_submit=pd.Timestamp("2025-01-31 23:00"),
        last_submit=pd.Timestamp("2025-02-01 11:00"),
        available_targets={first: MIN_RECORDED, others[0]: MIN_RECORDED - 1},
    )

    lines = report.lines()

    assert lines[:2] == ["file: log.swf", "jobs: 120"]
    assert "negative values set to missing: run_time=2" in lines
    assert "absurd values set to missing: run_time=3, used_memory_kb=1" in lines
    wait = next(line for line in lines if line.startswith("wait time"))
    assert "for 1,500 jobs" in wait and "assumed 7200 s" in wait and "2 h after" in wait
    assert (
        "span: 2025-01-31 23:00 .. 2025-02-01 11:00 UTC (0.5 days, 2 months)" in lines
    )
    assert f"target {first}: {MIN_RECORDED} jobs" in lines
    assert (
        f"target {others[0]}: not available (recorded for {MIN_RECORDED - 1} jobs, "
        f"fewer than {MIN_RECORDED})"
    ) in lines
    assert f"target {others[1]}: not available" in lines
    assert available_targets(report) == [first]


def test_an_empty_log_has_no_span_and_dates_from_1970_are_flagged():
    assert JobLogReport().span_line() == "span: no job with a submit time"
    report = JobLogReport(
        first_submit=pd.Timestamp("1970-01-01"),
        last_submit=pd.Timestamp("1970-01-01 12:00"),
        start_known=False,
    )
    assert report.span_line().endswith("so dates count from 1970-01-01")


def test_summarise_counts_jobs_assumed_waits_and_recorded_targets():
    column = {name: col for name, (col, _) in TRACE_TARGETS.items()}
    first, second, *_ = TRACE_TARGETS
    frame = pd.DataFrame(
        {
            "submit_time": pd.to_datetime(["2025-01-02", "2025-01-01", "2025-01-03"]),
            "wait_assumed": [True, False, True],
            column[first]: [1.0, None, 3.0],
        }
    )
    report = JobLogReport()
    report.summarise(frame)
    assert report.n_jobs == 3 and report.n_wait_assumed == 2
    assert report.first_submit == pd.Timestamp("2025-01-01")
    assert report.available_targets[first] == 2
    assert report.available_targets[second] == 0
