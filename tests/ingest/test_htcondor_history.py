"""The HTCondor history reader on generated ``condor_history -json`` output."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from panda_predictor.errors import UserInputError
from panda_predictor.ingest import (
    JOB_FRAME_COLUMNS,
    JobLogError,
    job_log_format,
    read_job_log,
    trace_name,
)
from panda_predictor.ingest.htcondor_history import read_htcondor_history

OWNERS = ("alice", "bob", "carol", "dave")
T0 = 1_700_000_000  # 2023-11-14 22:13:20 UTC
MEMORY_EXPR = "/Expr(( ( ResidentSetSize + 1023 ) / 1024 ))/"


def make_ads(seed: int, n: int = 200) -> list[dict]:
    """Return ``n`` job ads of 4 owners as condor_history has them, newest first.

    Every 10th job has no RequestMemory, every 7th no RemoteSysCpu, every 5th
    asks for time with AllowedJobDuration instead of MaxWallTimeMins, every 3rd
    reports a numeric MemoryUsage (else the default expression), every 25th was
    removed before it started.
    """
    rng = np.random.default_rng(seed)
    ads = []
    for i in range(n):
        owner = OWNERS[i % len(OWNERS)]
        cpus = int(rng.choice([1, 2, 4, 8]))
        qdate = T0 + i * 300 + int(rng.integers(0, 60))
        start = qdate + int(rng.integers(0, 3600))
        run = int(rng.integers(60, 20000))
        ad = {
            "ClusterId": 5000 + i // 4,
            "ProcId": i % 4,
            "GlobalJobId": f"schedd.example.org#{5000 + i // 4}.{i % 4}#{qdate}",
            "Owner": owner,
            "AcctGroup": f"group_{owner[0]}",
            "AccountingGroup": f"group_{owner[0]}.{owner}",
            "Cmd": f"/home/{owner}/bin/sim{i % 3}.sh",
            "JobUniverse": 5 if i % 2 else 9,
            "RequestCpus": cpus,
            "RequestMemory": 2000 * cpus,
            "QDate": qdate,
            "JobStartDate": start,
            "JobCurrentStartDate": start,
            "CompletionDate": start + run,
            "EnteredCurrentStatus": start + run,
            "RemoteWallClockTime": float(run),
            "RemoteUserCpu": float(run * cpus * 0.8),
            "RemoteSysCpu": float(run * cpus * 0.05),
            "ResidentSetSize": int(rng.integers(100_000, 4_000_000)),
            "MemoryUsage": MEMORY_EXPR,
            "JobStatus": 4,
            "ExitCode": 0,
        }
        ad["MaxWallTimeMins"] = int(run / 60 * 2) + 1
        if i % 5 == 0:
            del ad["MaxWallTimeMins"]
            ad["AllowedJobDuration"] = run * 3
        if i % 3 == 0:
            ad["MemoryUsage"] = int(rng.integers(100, 4000))
        if i % 10 == 0:
            del ad["RequestMemory"]
        if i % 7 == 0:
            del ad["RemoteSysCpu"]
        if i % 25 == 0:  # removed while idle: never started, never completed
            for name in ("JobStartDate", "JobCurrentStartDate", "ResidentSetSize"):
                del ad[name]
            ad.update(
                JobStatus=3,
                CompletionDate=0,
                RemoteWallClockTime=0.0,
                RemoteUserCpu=0.0,
                MemoryUsage=MEMORY_EXPR,
                EnteredCurrentStatus=qdate + 600,
            )
        ads.append(ad)
    return ads[::-1]  # condor_history lists the newest job first


def history_text(ads: list[dict], layout: str) -> str:
    """Return ads as ``condor_history -json`` (or ``-jsonl``) prints them."""
    if layout == "jsonl":
        text = "\n".join(json.dumps(ad) for ad in ads) + "\n"
    else:
        text = "[\n" + "\n,\n".join(json.dumps(ad, indent=2) for ad in ads) + "\n]\n"
    return text.replace("/", "\\/")  # HTCondor escapes every slash


def write(path, ads, layout="array", packed=False):
    data = history_text(ads, layout).encode()
    path.write_bytes(gzip.compress(data) if packed else data)
    return path


def expected_frame(ads: list[dict]) -> pd.DataFrame:
    """Return the documented mapping, written out per ad, sorted by QDate."""
    rows = []
    for position, ad in enumerate(ads, start=1):
        cpus = ad["RequestCpus"]
        started = "JobStartDate" in ad
        memory = ad["MemoryUsage"]
        if not isinstance(memory, int):
            memory = ad.get("ResidentSetSize", np.nan) / 1024
        if "AllowedJobDuration" in ad:
            req_time = ad["AllowedJobDuration"]
        else:
            req_time = ad["MaxWallTimeMins"] * 60
        rows.append(
            {
                "job_id": float(position),
                "submit_s": float(ad["QDate"]),
                "user": ad["Owner"],
                "group": ad["AcctGroup"],
                "executable": ad["Cmd"].rsplit("/", 1)[1],
                "queue": {5: "vanilla", 9: "grid"}[ad["JobUniverse"]],
                "req_procs": float(cpus),
                "req_time_s": float(req_time),
                "req_memory_mb": ad.get("RequestMemory", np.nan) / cpus,
                "wait_s": ad["JobStartDate"] - ad["QDate"] if started else np.nan,
                "finish_s": float(ad["CompletionDate"] or ad["EnteredCurrentStatus"]),
                "procs": float(cpus),
                "status": {4: 1.0, 3: 5.0}[ad["JobStatus"]],
                "run_s": ad["RemoteWallClockTime"],
                "cpu_s": (ad["RemoteUserCpu"] + ad.get("RemoteSysCpu", np.nan)) / cpus,
                "used_memory_mb": memory / cpus,
                "used_memory_total_mb": float(memory),
                "global_job_id": ad["GlobalJobId"],
            }
        )
    frame = pd.DataFrame(rows).sort_values("submit_s", kind="stable")
    return frame.reset_index(drop=True)


@pytest.fixture
def ads(seed):
    return make_ads(seed)


@pytest.fixture
def history(tmp_path, ads):
    return write(tmp_path / "history.json", ads)


def test_maps_every_column(history, ads):
    frame, report = read_htcondor_history(history)
    want = expected_frame(ads)
    assert list(frame.columns) == [*JOB_FRAME_COLUMNS, "global_job_id"]
    assert len(frame) == 200 and report.n_jobs == 200 and report.n_records == 200
    for column in want.columns:
        got, exp = frame[column], want[column]
        if pd.api.types.is_numeric_dtype(exp):
            assert np.allclose(got, exp, equal_nan=True), column
        else:
            assert got.astype(object).tolist() == exp.tolist(), column
    assert frame["partition"].isna().all()
    assert not frame["wait_assumed"].any()
    assert frame["submit_time"].iloc[0] == pd.Timestamp(want["submit_s"][0], unit="s")
    assert frame["submit_s"].is_monotonic_increasing


def test_units_of_one_handwritten_job(tmp_path):
    ad = {
        "Owner": "alice",
        "Cmd": "/usr/bin/athena.py",
        "JobUniverse": 5,
        "RequestCpus": 4,
        "RequestMemory": 8000,  # MB for the whole job
        "MaxWallTimeMins": 90,
        "QDate": T0,
        "JobCurrentStartDate": T0 + 120,
        "CompletionDate": T0 + 120 + 1000,
        "RemoteUserCpu": 3600.0,
        "RemoteSysCpu": 400.0,
        "ResidentSetSize": 2097152,  # KiB: 2048 MB for the whole job
        "CpusProvisioned": 4,
        "JobStatus": 4,
    }
    frame, report = read_htcondor_history(write(tmp_path / "one.json", [ad]))
    job = frame.iloc[0]
    assert job["submit_time"] == pd.Timestamp("2023-11-14 22:13:20")
    assert job["req_memory_mb"] == 2000 and job["req_time_s"] == 5400
    assert job["wait_s"] == 120 and job["run_s"] == 1000  # CompletionDate - start
    assert job["cpu_s"] == 1000 and job["used_memory_mb"] == 512
    assert job["used_memory_total_mb"] == 2048 and job["finish_s"] == T0 + 1120
    assert pd.isna(job["group"])
    assert report.missing["group"] == 1
    assert "group not recorded for 1 jobs (no AcctGroup or AccountingGroup)" in (
        report.lines()
    )


def test_missing_and_unusable_attributes_are_counted(history):
    _, report = read_htcondor_history(history)
    assert report.missing["req_memory_mb"] == 20  # every 10th
    assert report.missing["cpu_s"] == 29  # every 7th
    assert report.missing["wait_s"] == 8  # removed while idle
    assert report.missing["used_memory_mb"] == 8  # idle: an expression and no RSS
    assert report.unparsed == {"MemoryUsage": 136}  # the default expression
    lines = report.lines()
    assert "format: HTCondor history, JSON array (plain)" in lines
    assert "req_memory_mb not recorded for 20 jobs (no RequestMemory)" in lines
    assert (
        "values neither a plain number nor text (an unevaluated expression), read "
        "as not recorded: MemoryUsage=136" in lines
    )
    assert "target walltime: 200 jobs" in lines


def test_removed_idle_job_finishes_when_removed(history, ads):
    frame, _ = read_htcondor_history(history)
    idle = frame[frame["wait_s"].isna()]
    assert len(idle) == 8 and (idle["status"] == 5).all()
    assert np.allclose(idle["finish_s"], idle["submit_s"] + 600)
    assert (idle["run_s"] == 0).all() and not idle["wait_assumed"].any()


def test_job_without_dates_rests_on_the_assumed_wait(tmp_path):
    ads = [
        {"Owner": "bob", "QDate": T0, "RemoteWallClockTime": 500.0, "JobStatus": 2},
        {"Owner": "bob", "QDate": T0 + 1, "JobStatus": 1},  # no run: finish unknown
    ]
    frame, report = read_job_log(write(tmp_path / "h.jsonl", ads, "jsonl"))
    assert frame["finish_s"].iloc[0] == T0 + 3600 + 500
    assert np.isnan(frame["finish_s"].iloc[1])
    assert frame["wait_assumed"].tolist() == [True, False]
    assert frame["status"].tolist() == [0.0, 0.0]
    assert report.n_wait_assumed == 1
    assert any(
        x.startswith("wait time not recorded for 1 jobs") for x in report.lines()
    )


@pytest.mark.parametrize(
    ("layout", "packed", "name"),
    [
        ("jsonl", False, "history.jsonl"),
        ("array", True, "history.json.gz"),
        ("jsonl", True, "history.jsonl.gz"),
        ("array", False, "history.txt"),
    ],
    ids=["json-lines", "array-gzip", "json-lines-gzip", "any-suffix"],
)
def test_variants_read_like_the_plain_array(
    tmp_path, ads, history, layout, packed, name
):
    path = write(tmp_path / name, ads, layout, packed)
    plain, _ = read_htcondor_history(history)
    frame, report = read_job_log(path)
    assert job_log_format(path) == "htcondor"
    pd.testing.assert_frame_equal(frame, plain)
    assert report.layout == {"jsonl": "JSON lines", "array": "JSON array"}[layout]
    assert report.compressed is packed


def test_attribute_names_are_case_insensitive(tmp_path, ads, history):
    lowered = [{k.lower(): v for k, v in ad.items()} for ad in ads]
    frame, _ = read_htcondor_history(write(tmp_path / "lower.json", lowered))
    pd.testing.assert_frame_equal(frame, read_htcondor_history(history)[0])


def test_queue_attribute_names_another_class(tmp_path, ads):
    for i, ad in enumerate(ads):
        ad["Queue"] = "long" if i % 2 else "short"
    frame, report = read_htcondor_history(
        write(tmp_path / "q.json", ads), queue_attribute="Queue"
    )
    assert set(frame["queue"]) == {"long", "short"}
    assert report.queue_attribute == "Queue"


def test_broken_json_line_and_non_ad_are_counted(tmp_path, ads):
    path = tmp_path / "h.jsonl"
    lines = [json.dumps(ad) for ad in ads[:3]] + ['{"Owner": "x", "QD', "[1, 2]"]
    path.write_text("\n".join(lines) + "\n")
    frame, report = read_htcondor_history(path)
    assert len(frame) == 3 and report.n_records == 5 and report.n_malformed == 2
    assert "records: 5 (2 not job ads, skipped)" in report.lines()


def test_histories_of_several_schedds_appended_read_as_one(tmp_path, ads, history):
    # for s in schedds; do condor_history -json -name $s >> all.json; done
    path = tmp_path / "all.json"
    path.write_text(
        "".join(history_text(part, "json") for part in (ads[:70], ads[70:71], ads[71:]))
    )
    frame, report = read_htcondor_history(path)
    whole, _ = read_htcondor_history(history)
    pd.testing.assert_frame_equal(frame, whole)
    assert report.n_records == 200
    assert (
        "format: HTCondor history, 3 JSON arrays (histories appended to one "
        "file) (plain)" in report.lines()
    )


def test_ad_without_qdate_is_left_out_and_counted(tmp_path, ads):
    del ads[0]["QDate"]
    ads[1]["QDate"] = 0
    frame, report = read_htcondor_history(write(tmp_path / "h.json", ads))
    assert len(frame) == 198 and report.n_without_submit_time == 2
    assert set(frame["job_id"]) == set(range(3, 201))  # positions in the file


def test_an_ad_exported_twice_is_read_once(tmp_path, ads):
    # Two overlapping exports joined: the last 20 ads again, one of them with a
    # value set aside, so the counts must come from the ads kept.
    again = [dict(ad) for ad in ads[-20:]]
    again[0]["RequestMemory"] = 10**12
    # Local ids repeat across schedds: without a GlobalJobId an ad is kept.
    local = [{k: v for k, v in ad.items() if k != "GlobalJobId"} for ad in ads[:2]]
    frame, report = read_htcondor_history(
        write(tmp_path / "h.json", ads + again + local)
    )
    assert len(frame) == 202 and report.n_duplicate == 20
    # Every count comes from the ads kept, as if the copies were not there.
    _, alone = read_htcondor_history(write(tmp_path / "alone.json", ads + local))
    assert report.absurd == alone.absurd == {}
    assert report.unparsed == alone.unparsed and report.missing == alone.missing
    assert sum(report.unparsed.values()) > 0
    assert "duplicate ads skipped: 20 (a GlobalJobId an earlier ad already had)" in (
        report.lines()
    )


def test_a_history_without_repeats_says_nothing_of_them(history):
    _, report = read_htcondor_history(history)
    assert report.n_duplicate == 0
    assert not any("duplicate" in line for line in report.lines())


def test_negative_and_absurd_values_are_set_aside(tmp_path, ads):
    ads[0]["JobStartDate"] = ads[0]["QDate"] - 50  # clock skew
    ads[1]["RequestMemory"] = 10**12
    frame, report = read_htcondor_history(write(tmp_path / "h.json", ads))
    assert report.negative == {"wait_s": 1} and report.absurd == {"req_memory_mb": 1}
    assert frame["wait_s"].min() >= 0 and frame["req_memory_mb"].max() < 1e6


def test_empty_array_reads_as_no_jobs(tmp_path):
    path = tmp_path / "none.json"
    path.write_text("[]\n")
    frame, report = read_job_log(path)
    assert frame.empty and report.n_jobs == 0
    assert "span: no job with a submit time" in report.lines()


@pytest.mark.parametrize(
    ("name", "suffix"),
    [
        ("history", ".json"),
        ("history", ".jsonl"),
        ("history", ".json.gz"),
        ("history", ".jsonl.gz"),
        ("LCG-2005-1", ".swf.gz"),
    ],
    ids=["json", "jsonl", "json-gz", "jsonl-gz", "swf-gz"],
)
def test_trace_name_strips_format_suffixes(name, suffix):
    assert trace_name(f"/logs/{name}{suffix}") == name


@pytest.mark.parametrize(
    ("content", "error", "match"),
    [
        (None, FileNotFoundError, "The HTCondor history file must exist"),
        (b"1 0 10 100 2 90\n", ValueError, r"condor_history -json output.*'1 0 10"),
        (b'[\n{"Owner": "a"}\n,\n{"Own', ValueError, r"invalid JSON at line 4"),
        (b'[{"Owner": "a"}]\n{"Owner": "b"}\n', ValueError, r"line 2 column 1 \(Extra"),
        (b'[{"Owner": "a"}]\n[{"Own', ValueError, r"invalid JSON at line 2"),
        (b'\n{"Owner": \nnot json\n', ValueError, r"no line that is JSON \(line 2"),
        (gzip.compress(b'[{"Owner": "a"}]' * 400)[:30], ValueError, "complete gzip"),
        (b"", ValueError, "with no content instead"),
    ],
    ids=[
        "missing",
        "swf-text",
        "cut-array",
        "object-after-array",
        "cut-second-array",
        "no-json-line",
        "cut-gzip",
        "empty",
    ],
)
def test_read_errors(tmp_path, content, error, match):
    path = tmp_path / "history.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(error, match=match):
        read_htcondor_history(path)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"queue_attribute": ""}, "The 'queue_attribute' field must be a ClassAd"),
        ({"queue_attribute": "My Queue"}, "Got 'My Queue' instead"),
        ({"assumed_wait_s": -5}, "The 'assumed_wait_s' field must be a finite"),
    ],
    ids=["empty-queue-attribute", "queue-attribute-with-space", "negative-wait"],
)
def test_argument_errors(history, kw, match):
    with pytest.raises(ValueError, match=match):
        read_htcondor_history(history, **kw)


@pytest.mark.parametrize(
    ("content", "error", "match"),
    [
        (None, FileNotFoundError, "The job log file must exist"),
        (b"", ValueError, r"history\.log' with an empty file instead"),
        (b"job,user,runtime\n1,a,5\n", ValueError, r"text starting 'job,user"),
        (b"PK\x03\x04\x00binary", ValueError, r"must be SWF text or condor_history"),
        (gzip.compress(b"1 0 0 5\n" * 3000)[:40], ValueError, "complete gzip stream"),
    ],
    ids=["missing", "empty", "csv", "zip", "cut-gzip"],
)
def test_read_job_log_names_what_it_found(tmp_path, content, error, match):
    path = tmp_path / "history.log"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(error, match=match):
        read_job_log(path)


def test_errors_are_user_input_errors(tmp_path):
    """The command line prints user input errors as one line, not a traceback."""
    path = tmp_path / "empty.json"
    path.write_text("")
    with pytest.raises(UserInputError, match="an empty file") as caught:
        read_job_log(path)
    assert isinstance(caught.value, JobLogError | ValueError)


def test_read_job_log_reads_swf_too(tmp_path):
    path = tmp_path / "tiny.swf"
    path.write_text("; UnixStartTime: 0\n1 0 10 100 2 90 2048 2 200 4096 1 1 1 1 1 1\n")
    frame, report = read_job_log(path)
    assert job_log_format(path) == "swf" and len(frame) == 1
    assert report.lines()[0] == f"file: {path}"
