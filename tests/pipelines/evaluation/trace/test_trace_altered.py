"""Altered copies of a job log, benchmarked by the command's own function."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from panda_predictor.ingest.swf import read_swf
from pipelines.evaluation.trace.altered import (
    ALTERATIONS,
    EXECUTABLE,
    GROUP,
    REQUEST_MEMORY,
    REQUEST_TIME,
    USER,
    main,
    read_swf_lines,
    write_altered,
)
from tests.pipelines.evaluation.trace.test_trace_benchmark import write_trace


@pytest.fixture
def log(tmp_path, seed):
    return write_trace(tmp_path / "small.swf", seed, n=200)


def _altered(log, name, tmp_path, seed=1):
    (path,) = write_altered(log, [name], tmp_path, seed)
    return read_swf_lines(path)


def test_no_requests_removes_time_and_memory_requests_and_nothing_else(log, tmp_path):
    _, before = read_swf_lines(log)
    _, after = _altered(log, "no-requests", tmp_path)
    assert len(after) == len(before)
    assert {j[REQUEST_TIME] for j in after} == {"-1"}
    assert {j[REQUEST_MEMORY] for j in after} == {"-1"}
    for old, new in zip(before, after, strict=True):
        kept = [i for i in range(len(old)) if i not in (REQUEST_TIME, REQUEST_MEMORY)]
        assert [old[i] for i in kept] == [new[i] for i in kept]


def test_half_requests_removes_about_half(log, tmp_path):
    _, after = _altered(log, "half-requests", tmp_path)
    removed = sum(j[REQUEST_TIME] == "-1" for j in after) / len(after)
    assert 0.35 < removed < 0.65
    assert all((j[REQUEST_TIME] == "-1") == (j[REQUEST_MEMORY] == "-1") for j in after)


def test_no_keys_removes_user_group_and_executable(log, tmp_path):
    _, after = _altered(log, "no-keys", tmp_path)
    for field in (USER, GROUP, EXECUTABLE):
        assert {j[field] for j in after} == {"-1"}


def test_three_users_folds_the_users_into_three_accounts(tmp_path):
    path = tmp_path / "users.swf"
    path.write_text(
        "; UnixStartTime: 0\n"
        + "".join(
            f"{i} {i * 10} 0 5 1 -1 -1 1 10 -1 1 {u} 1 1 -1 -1 -1 -1\n"
            for i, u in enumerate([1, 2, 3, 4, 5, 6, 7, -1], 1)
        )
    )
    _, after = _altered(path, "three-users", tmp_path)
    assert [j[USER] for j in after] == ["2", "3", "1", "2", "3", "1", "2", "-1"]


def test_shuffled_keeps_every_job_in_another_order(log, tmp_path):
    _, before = read_swf_lines(log)
    _, after = _altered(log, "shuffled", tmp_path)
    assert sorted(map(tuple, after)) == sorted(map(tuple, before))
    assert after != before
    _, again = _altered(log, "shuffled", tmp_path)
    assert again == after  # the same seed, the same order


def test_first_jobs_keeps_the_first_ones(log, tmp_path, monkeypatch):
    import pipelines.evaluation.trace.altered as altered

    monkeypatch.setattr(altered, "FIRST_JOBS", 50)
    _, before = read_swf_lines(log)
    _, after = _altered(log, "first-jobs", tmp_path)
    assert after == before[:50]


def test_the_altered_log_keeps_its_header_and_reads_as_swf(log, tmp_path):
    (path,) = write_altered(log, ["no-requests"], tmp_path)
    assert path.name == "small-no-requests.swf.gz"
    with gzip.open(path, "rt") as handle:
        text = handle.read()
    assert text.startswith("; UnixStartTime: 820454400\n; Note: synthetic\n")
    assert "; Altered: no-requests" in text
    frame, _ = read_swf(path)
    assert len(frame) == 200
    assert frame["req_time_s"].isna().all() and frame["req_memory_mb"].isna().all()


def test_several_alterations_are_written_from_one_read(log, tmp_path):
    paths = write_altered(log, ["no-keys", "first-jobs"], tmp_path)
    assert [p.name for p in paths] == [
        "small-no-keys.swf.gz",
        "small-first-jobs.swf.gz",
    ]
    _, no_keys = read_swf_lines(paths[0])
    _, first = read_swf_lines(paths[1])
    assert {j[USER] for j in no_keys} == {"-1"}
    assert first == read_swf_lines(log)[1]  # fewer than FIRST_JOBS: all kept


def test_every_alteration_is_seeded(log, tmp_path):
    for name, alter in ALTERATIONS.items():
        _, jobs = read_swf_lines(log)
        first = alter(jobs, random.Random(3))
        assert alter(jobs, random.Random(3)) == first, name


def test_a_file_that_is_not_swf_is_refused_naming_the_option(tmp_path):
    path = tmp_path / "history.json"
    path.write_text('{"ClusterId": 1}\n')
    with pytest.raises(ValueError, match="'--log' file must be an SWF job log"):
        read_swf_lines(path)
    with pytest.raises(SystemExit, match="'--log' file must be an SWF"):
        main(["--log", str(path), "--out", str(tmp_path / "out")])


def test_an_unknown_alteration_is_refused_with_the_choices(log, tmp_path):
    with pytest.raises(SystemExit, match="'--only' option must name alterations"):
        main(["--log", str(log), "--only", "no-requests,sideways"])


def test_the_original_and_an_alteration_are_benchmarked_and_tabled(
    log, tmp_path, capsys
):
    out = tmp_path / "out"
    main(
        [
            "--log",
            str(log),
            "--only",
            "no-requests",
            "--out",
            str(out),
            "--n-estimators",
            "10",
        ]
    )
    printed = capsys.readouterr()
    rows = [r for r in printed.out.splitlines() if r.startswith("| small")]
    assert {r.split("|")[1].strip() for r in rows} == {"small", "small-no-requests"}
    assert "[2/2] small-no-requests" in printed.err
    full = json.loads((out / "small-no-requests" / "full.json").read_text())
    assert full["file"] == "small-no-requests.swf.gz"
    # Benchmarked without its requests: the request baseline has nothing to ask
    # for on any test job (it is scored only where a request exists).
    assert full["full_scores"]["walltime"].get("baseline:request") is None
    original = json.loads((out / "small" / "full.json").read_text())
    assert "baseline:request" in original["full_scores"]["walltime"]
