"""benchmarks/scaled_swf.py: copies of a log that the reader takes as new jobs."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks.scaled_swf import main
from panda_predictor.ingest import read_job_log
from tests.pipelines.evaluation.trace.test_trace_benchmark import write_trace


@pytest.fixture
def source(tmp_path):
    return write_trace(tmp_path / "source.swf", seed=5, n=60)


def test_copies_with_users_of_their_own_are_new_jobs_and_new_keys(tmp_path, source):
    out = tmp_path / "scaled.swf.gz"
    main([str(source), str(out), "--copies", "3", "--shift", "997", "--own-users"])
    original, _ = read_job_log(source)
    jobs, report = read_job_log(out)
    assert len(jobs) == 3 * len(original)
    assert report.n_duplicate == 0
    assert report.n_repeated_number == 0
    assert jobs["user"].nunique() == 3 * original["user"].nunique()
    assert jobs["submit_time"].is_monotonic_increasing
    step = pd.Timedelta(seconds=997)
    expected = sorted(t + k * step for k in range(3) for t in original["submit_time"])
    assert list(jobs["submit_time"]) == expected


def test_after_puts_each_copy_past_the_one_before(tmp_path, source):
    out = tmp_path / "after.swf"
    main([str(source), str(out), "--copies", "2", "--after"])
    original, _ = read_job_log(source)
    jobs, _ = read_job_log(out)
    span = original["submit_time"].max() - original["submit_time"].min()
    assert jobs["submit_time"].max() - jobs["submit_time"].min() > 2 * span
    assert jobs["user"].nunique() == original["user"].nunique()


def test_no_copies_is_a_clear_error(tmp_path, source, capsys):
    with pytest.raises(SystemExit):
        main([str(source), str(tmp_path / "x.swf"), "--copies", "0"])
    assert "--copies must be at least 1. Got 0 instead." in capsys.readouterr().err


def test_job_numbers_from_zero_do_not_repeat_across_copies(tmp_path, source):
    lines = source.read_text().splitlines()
    zero_based = [
        line
        if line.startswith(";") or not line
        else " ".join([str(int(line.split()[0]) - 1), *line.split()[1:]])
        for line in lines
    ]
    source.write_text("\n".join(zero_based) + "\n")
    out = tmp_path / "zero.swf"
    main([str(source), str(out), "--copies", "2"])
    _, report = read_job_log(out)
    assert report.n_repeated_number == 0


def test_a_source_without_jobs_is_a_clear_error(tmp_path, capsys):
    empty = tmp_path / "empty.swf"
    empty.write_text("; UnixStartTime: 0\n")
    with pytest.raises(SystemExit):
        main([str(empty), str(tmp_path / "x.swf")])
    assert "The source must be an SWF job log" in capsys.readouterr().err
