"""The SWF reader on small handwritten files: header, gaps, truncation, bad values."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from panda_predictor.ingest.swf import available_targets, read_swf

HEADER = """; Version: 2.2
; UnixStartTime: 1000000000
; Note: handwritten
"""
# fields: job submit wait run alloc cpu mem reqp reqt reqmem status user group
# exe queue partition preceding think
JOBS = """\
1 0 10 100 2 90 2048 2 200 4096 1 1 1 1 1 1 -1 -1

2 50 5 300 4 -1 -1 4 600 -1 1 2 1 2 1 1 -1 -1
3 60 -7 50 1 40 1024 1 100 2048 1 1 1 1 1 1 -1 -1
4 70 0 99999999 1 40 1024 1 100 2048 1 1 1 1 1 1 -1 -1
5 80 1 20 1 10
"""


@pytest.fixture
def swf_file(tmp_path):
    path = tmp_path / "tiny.swf"
    path.write_text(HEADER + JOBS)
    return path


def test_reads_header_jobs_and_counts_every_oddity(swf_file):
    frame, report = read_swf(swf_file)
    assert report.header["UnixStartTime"] == "1000000000"
    assert report.n_comments == 3 and report.n_blank == 1
    assert report.n_jobs == 5 and len(frame) == 5  # nothing silently dropped
    assert report.n_truncated == 1
    assert report.negative["wait_time"] == 1
    assert report.absurd["run_time"] == 1
    assert str(frame["submit_time"].iloc[0]) == "2001-09-09 01:46:40"


def test_maps_fields_and_missing_values(swf_file):
    frame, _ = read_swf(swf_file)
    first, second = frame.iloc[0], frame.iloc[1]
    assert first["run_s"] == 100 and first["cpu_s"] == 90
    assert first["used_memory_mb"] == 2.0 and first["used_memory_total_mb"] == 4.0
    assert first["req_memory_mb"] == 4.0 and first["finish_s"] == 110
    assert first["user"] == "1" and second["executable"] == "2"
    assert np.isnan(second["cpu_s"]) and np.isnan(second["used_memory_mb"])
    assert np.isnan(frame.iloc[2]["finish_s"])  # negative wait: finish unknown
    assert np.isnan(frame.iloc[3]["run_s"])  # absurd run time: missing
    assert np.isnan(frame.iloc[4]["req_time_s"])  # truncated line padded


def test_gzip_file_reads_like_plain(tmp_path, swf_file):
    packed = tmp_path / "tiny.swf.gz"
    packed.write_bytes(gzip.compress(swf_file.read_bytes()))
    plain, _ = read_swf(swf_file)
    zipped, report = read_swf(packed)
    assert zipped.equals(plain) and report.n_jobs == 5


def test_unrecorded_target_is_not_available(tmp_path):
    rows = "".join(
        f"{i} {i * 10} 0 {i + 5} 1 -1 -1 1 100 -1 1 1 -1 -1 -1 -1 -1 -1\n"
        for i in range(1, 60)
    )
    path = tmp_path / "runonly.swf"
    path.write_text(rows)
    frame, report = read_swf(path)
    assert available_targets(report) == ["walltime"]
    assert frame["used_memory_mb"].isna().all()
    assert "target ramcount: not available" in report.lines()


def test_malformed_line_is_counted(tmp_path):
    path = tmp_path / "bad.swf"
    path.write_text("1 0 0 5 1 1 1 1 1 1 1 1 1 1 1 1 -1 -1\nthis is not a job\n")
    frame, report = read_swf(path)
    assert report.n_malformed == 1 and len(frame) == 1


@pytest.mark.parametrize(
    ("name", "content", "error", "match"),
    [
        ("missing", None, FileNotFoundError, "The SWF file must exist"),
        (
            "cut_gzip",
            gzip.compress(b"1 0 0 5\n" * 500)[:40],
            ValueError,
            "complete gzip stream",
        ),
    ],
    ids=["missing-file", "cut-gzip"],
)
def test_read_errors(tmp_path, name, content, error, match):
    path = tmp_path / f"{name}.swf.gz"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(error, match=match):
        read_swf(path)


def test_a_job_listed_twice_is_read_once_and_a_reused_number_is_kept(tmp_path):
    job = "{n} {t} 0 5 1 1 1 1 100 -1 1 1 -1 -1 -1 -1 -1 -1\n"
    first, second = job.format(n=1, t=0), job.format(n=2, t=10)
    # The second job repeated verbatim (tabs instead of spaces: still the same
    # fields), then a different job that reuses number 1.
    path = tmp_path / "twice.swf"
    path.write_text(first + second + second.replace(" ", "\t") + job.format(n=1, t=99))
    frame, report = read_swf(path)
    assert frame["submit_s"].tolist() == [0.0, 10.0, 99.0]
    assert (report.n_duplicate, report.n_repeated_number) == (1, 1)
    lines = report.lines()
    assert any(line.startswith("duplicate lines skipped: 1 ") for line in lines)
    assert any(line.startswith("repeated job numbers: 1 (a line") for line in lines)


def test_a_log_without_repeats_says_nothing_of_them(swf_file):
    _, report = read_swf(swf_file)
    assert not any("duplicate" in line or "repeated" in line for line in report.lines())
