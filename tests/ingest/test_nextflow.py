"""The Nextflow trace reader on small handwritten traces, human-readable and raw."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from panda_predictor.ingest import (
    JobLogError,
    job_log_format,
    job_logs_in,
    read_job_log,
    read_nextflow_trace,
)
from panda_predictor.ingest.to_panda import jobs_to_tasks

FIELDS = [
    "task_id",
    "hash",
    "native_id",
    "process",
    "tag",
    "name",
    "status",
    "exit",
    "cpus",
    "memory",
    "time",
    "attempt",
    "submit",
    "start",
    "complete",
    "duration",
    "realtime",
    "%cpu",
    "peak_rss",
    "rchar",
    "wchar",
    "queue",
    "my_extra_field",
]
# Human-readable (Nextflow's default): every mapped field, a failed-then-retried task
# (killed for memory, exit 137), a task killed for time (140) and missing values.
HUMAN_ROWS = [
    "1|ab/000001|11|NF:FASTQC|s1|NF:FASTQC (s1)|COMPLETED|0|2|4 GB|1h|1|"
    "2024-03-01 10:00:00.000|2024-03-01 10:00:10.000|2024-03-01 10:02:10.000|"
    "2m 10s|2m|150%|1 GB|1.5 GB|512 MB|normal|x",
    "2|ab/000002|12|NF:ALIGN|s1|NF:ALIGN (s1)|FAILED|137|4|8 GB|2h|1|"
    "2024-03-01 10:03:00.000|2024-03-01 10:03:05.000|2024-03-01 10:13:05.000|"
    "10m 5s|10m|380%|7.5 GB|2 GB|0|normal|x",
    "3|ab/000003|13|NF:ALIGN|s1|NF:ALIGN (s1)|COMPLETED|0|4|16 GB|2h|2|"
    "2024-03-01 10:14:00.000|-|-|1h 1m|1h|400%|10 GB|-|-|normal|x",
    "4|ab/000004|14|NF:MARKDUP|s2|NF:MARKDUP (s2)|FAILED|140|1|2 GB|30m|1|"
    "2024-03-01 10:20:00.000|2024-03-01 10:20:30.000|2024-03-01 10:50:30.000|"
    "30m 30s|30m|95.5%|1.2 GB|100 MB|10 KB|long|x",
    "5|ab/000005|15|NF:MULTIQC|-|NF:MULTIQC|COMPLETED|0|-|-|-|-|"
    "2024-03-01 11:30:00.000|-|-|-|4.5s|-|-|-|-|-|x",
]
T0 = 1_709_287_200_000  # 2024-03-01 10:00:00 UTC, epoch ms
GB, MB = 1024**3, 1024**2
# The same tasks with trace.raw = true: bytes, milliseconds, epoch milliseconds.
RAW_ROWS = [
    f"1|ab/000001|11|NF:FASTQC|s1|NF:FASTQC (s1)|COMPLETED|0|2|{4 * GB}|3600000|1|"
    f"{T0}|{T0 + 10_000}|{T0 + 130_000}|130000|120000|150.0|{GB}|{int(1.5 * GB)}|"
    f"{512 * MB}|normal|x",
    f"2|ab/000002|12|NF:ALIGN|s1|NF:ALIGN (s1)|FAILED|137|4|{8 * GB}|7200000|1|"
    f"{T0 + 180_000}|{T0 + 185_000}|{T0 + 785_000}|605000|600000|380|"
    f"{int(7.5 * GB)}|{2 * GB}|0|normal|x",
    f"3|ab/000003|13|NF:ALIGN|s1|NF:ALIGN (s1)|COMPLETED|0|4|{16 * GB}|7200000|2|"
    f"{T0 + 840_000}|-|-|3660000|3600000|400|{10 * GB}|-|-|normal|x",
    f"4|ab/000004|14|NF:MARKDUP|s2|NF:MARKDUP (s2)|FAILED|140|1|{2 * GB}|1800000|1|"
    f"{T0 + 1_200_000}|{T0 + 1_230_000}|{T0 + 3_030_000}|1830000|1800000|95.5|"
    f"{int(1.2 * GB)}|{100 * MB}|{10 * 1024}|long|x",
    f"5|ab/000005|15|NF:MULTIQC|-|NF:MULTIQC|COMPLETED|0|-|-|-|-|{T0 + 5_400_000}|"
    "-|-|-|4500|-|-|-|-|-|x",
]


def trace_text(rows: list[str], sep: str = "\t", fields=FIELDS) -> str:
    return "\n".join([sep.join(fields), *(r.replace("|", sep) for r in rows)]) + "\n"


@pytest.fixture
def human(tmp_path):
    path = tmp_path / "execution_trace.txt"
    path.write_text(trace_text(HUMAN_ROWS))
    return path


def test_every_field_maps_onto_the_job_frame(human):
    frame, report = read_nextflow_trace(human)
    assert len(frame) == 5 and report.n_jobs == 5
    first = frame.iloc[0]
    assert first["executable"] == "NF:FASTQC" and first["instance"] == "s1"
    assert first["queue"] == "normal" and first["user"] == "execution_trace"
    assert first["req_procs"] == 2 and first["procs"] == 2
    assert first["req_memory_mb"] == 2048.0  # 4 GB over 2 cores
    assert first["req_time_s"] == 3600.0
    assert first["submit_s"] == T0 / 1000 and first["wait_s"] == 10.0
    assert first["finish_s"] == T0 / 1000 + 130.0  # complete
    assert first["run_s"] == 120.0  # realtime
    assert first["cpu_s"] == pytest.approx(1.5 * 120 / 2)  # %cpu x realtime / cores
    assert first["used_memory_mb"] == 512.0  # peak_rss over 2 cores
    expected_io = (1.5 * GB + 512 * MB) / 1024 / 120 / 2
    assert first["io_kbps"] == pytest.approx(expected_io)  # kBPerS per core
    assert first["status"] == 1.0 and not first["wait_assumed"]
    assert report.ignored_fields == ["native_id", "my_extra_field"]


def test_a_failed_attempt_is_a_lower_bound_never_a_label(human):
    frame, report = read_nextflow_trace(human)
    failed, retry, timed_out = frame.iloc[1], frame.iloc[2], frame.iloc[3]
    for row in (failed, timed_out):
        assert row[["run_s", "cpu_s", "used_memory_mb", "io_kbps"]].isna().all()
        assert row["status"] == 0.0
    # Killed for memory: it needed more than its request (8 GB / 4 cores).
    assert failed["killed_for"] == "memory"
    assert failed["used_memory_at_least_mb"] == 2048.0
    assert failed["run_at_least_s"] == 600.0
    # Killed for time: more than its 30 min.
    assert timed_out["killed_for"] == "time" and timed_out["run_at_least_s"] == 1800
    assert timed_out["used_memory_at_least_mb"] == pytest.approx(1.2 * 1024)
    # The retry asked for twice the memory and is a labelled task of its own.
    assert retry["attempt"] == 2 and retry["req_memory_mb"] == 4096.0
    assert retry["used_memory_mb"] == 2560.0 and retry["run_s"] == 3600.0
    assert np.isnan(retry["used_memory_at_least_mb"])
    assert report.n_failed == 2 and report.n_retries == 1
    assert report.n_killed == {"memory": 1, "time": 1}
    tasks = jobs_to_tasks(frame)
    assert np.isnan(tasks.loc[1, "ramcount"]) and tasks.loc[1, "ramcount_at_least"]
    assert tasks.loc[3, "walltime_at_least"] == 1800.0


def test_missing_values_stay_missing_and_times_fall_back(human):
    frame, report = read_nextflow_trace(human)
    retry, bare = frame.iloc[2], frame.iloc[4]
    # No start or complete: the finish is submit + duration, the wait unknown.
    assert np.isnan(retry["wait_s"]) and not retry["wait_assumed"]
    assert retry["finish_s"] == retry["submit_s"] + 3660.0
    assert np.isnan(retry["io_kbps"])  # rchar and wchar not recorded
    # Nothing but a realtime: one core (Nextflow's default), the wait assumed.
    assert bare["req_procs"] == 1 and np.isnan(bare["req_memory_mb"])
    assert bare["instance"] == "NF:MULTIQC" and bare["run_s"] == 4.5
    assert np.isnan(bare["cpu_s"]) and np.isnan(bare["used_memory_mb"])
    assert bare["wait_assumed"] and bare["finish_s"] == bare["submit_s"] + 3604.5
    assert report.n_wait_assumed == 1


@pytest.mark.parametrize("sep", ["\t", ","], ids=["tab", "comma"])
def test_raw_numbers_read_as_the_human_values(tmp_path, human, sep):
    path = tmp_path / "raw.csv"
    path.write_text(trace_text(RAW_ROWS, sep=sep))
    raw, report = read_job_log(path)
    expected, _ = read_job_log(human)
    assert report.layouts == ["tab-separated" if sep == "\t" else "comma-separated"]
    same = [c for c in expected.columns if c not in ("user", "trace_file")]
    pd.testing.assert_frame_equal(raw[same], expected[same], check_exact=False)


def test_the_default_fields_alone_are_enough(tmp_path):
    fields = [
        "task_id",
        "hash",
        "native_id",
        "name",
        "status",
        "exit",
        "submit",
        "duration",
        "realtime",
        "%cpu",
        "peak_rss",
        "peak_vmem",
        "rchar",
        "wchar",
    ]
    row = (
        "19|45/ab752a|2032|NFCORE_X:BLAST (1)|COMPLETED|0|2014-10-23 16:33:16.288|"
        "1m|5s|0.0%|29.8 MB|354 MB|33.3 MB|0"
    )
    path = tmp_path / "trace.txt"
    path.write_text(trace_text([row], fields=fields))
    frame, _ = read_nextflow_trace(path)
    assert frame.loc[0, "executable"] == "NFCORE_X:BLAST"
    assert frame.loc[0, "instance"] == "NFCORE_X:BLAST (1)"
    assert frame.loc[0, "req_procs"] == 1 and frame.loc[0, "run_s"] == 5.0
    assert frame.loc[0, "used_memory_mb"] == pytest.approx(29.8)
    assert frame.loc[0, "finish_s"] == frame.loc[0, "submit_s"] + 60.0
    assert frame.loc[0, "io_kbps"] == pytest.approx(33.3 * 1024 / 5)


def _dropped(*names: str) -> tuple[list[str], list[str]]:
    keep = [j for j, f in enumerate(FIELDS) if f not in names]
    rows = ["|".join(r.split("|")[j] for j in keep) for r in HUMAN_ROWS]
    return rows, [FIELDS[j] for j in keep]


def _bad(row: int, old: str, new: str) -> list[str]:
    rows = list(HUMAN_ROWS)
    assert old in rows[row]
    rows[row] = rows[row].replace(old, new, 1)
    return rows


@pytest.mark.parametrize(
    ("rows", "fields", "match"),
    [
        (*_dropped("submit"), "name the field 'submit'. Got the fields .* at line 1"),
        (*_dropped("process", "name"), "name the field 'process' or 'name'"),
        (_bad(0, "4 GB", "4 XB"), FIELDS, "'memory' field .* Got '4 XB' at line 2"),
        (_bad(3, "1.2 GB", "-1.2 GB"), FIELDS, "'peak_rss' .* Got '-1.2 GB' at line 5"),
        (_bad(1, "|0|normal", "|-5|normal"), FIELDS, "'wchar' .* Got '-5' at line 3"),
        (_bad(0, "2m 10s", "2 weeks"), FIELDS, "'duration' .* Got '2 weeks' at line 2"),
        (_bad(0, "150%", "lots%"), FIELDS, "'%cpu' .* Got 'lots%' at line 2"),
        (
            _bad(0, "2024-03-01 10:00:10.000", "yesterday"),
            FIELDS,
            "'start' field must be a timestamp.* Got 'yesterday' at line 2",
        ),
        (_bad(2, "|4|16 GB", "|0|16 GB"), FIELDS, "'cpus' .* Got '0' at line 4"),
        (_bad(2, "|4|16 GB", "|2.5|16 GB"), FIELDS, "'cpus' .* Got '2.5' at line 4"),
        (
            _bad(2, "2024-03-01 10:14:00.000", "-"),
            FIELDS,
            "'submit' field of a completed task .* Got '-' at line 4",
        ),
        (
            _bad(4, "|x", ""),
            FIELDS,
            "as many fields as its header \\(23\\). Got 22 at line 6",
        ),
    ],
    ids=[
        "no-submit-field",
        "no-process-or-name",
        "unknown-unit",
        "negative-size",
        "negative-raw-size",
        "unknown-duration-unit",
        "bad-percent",
        "bad-timestamp",
        "zero-cpus",
        "fractional-cpus",
        "completed-without-submit",
        "short-line",
    ],
)
def test_bad_input_names_field_line_and_value(tmp_path, rows, fields, match):
    path = tmp_path / "bad.txt"
    path.write_text(trace_text(rows, fields=fields))
    with pytest.raises(JobLogError, match=match):
        read_job_log(path)


def test_nothing_is_written_from_a_file_or_folder_that_fails(tmp_path, human):
    from panda_predictor.cli.ingest import ingest
    from panda_predictor.settings import load_settings

    settings = load_settings(home=tmp_path / "home")
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a_trace.txt").write_text(human.read_text())
    (folder / "b_trace.txt").write_text(trace_text(_bad(3, "1.2 GB", "-1 GB")))
    for source in (folder / "b_trace.txt", folder):
        out = tmp_path / f"{source.name}.parquet"
        result = CliRunner().invoke(
            ingest, ["log", str(source), "--out", str(out)], obj=settings
        )
        assert result.exit_code != 0 and "'peak_rss'" in result.output
        assert "line 5" in result.output and not out.exists()
    assert not (tmp_path / "home" / "traces").exists()


def test_ingest_log_writes_the_tasks_with_iointensity(tmp_path, human):
    from panda_predictor.cli.ingest import ingest
    from panda_predictor.settings import load_settings

    settings = load_settings(home=tmp_path / "home")
    result = CliRunner().invoke(ingest, ["log", str(human)], obj=settings)
    assert result.exit_code == 0, result.output
    assert "format: Nextflow trace, tab-separated" in result.output
    tasks = pd.read_parquet(tmp_path / "home" / "traces" / "execution_trace.parquet")
    assert tasks["iointensity"].notna().sum() == 1
    assert list(tasks["taskname"]) == ["s1", "s1", "s1", "s2", "NF:MULTIQC"]
    assert (tasks["labels_known_at"] >= tasks["creationdate"]).all()


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (trace_text(HUMAN_ROWS), "nextflow"),
        (trace_text(RAW_ROWS, sep=","), "nextflow"),
        ("\ufeff" + trace_text(HUMAN_ROWS), "nextflow"),
        ("; Version: 2.2\n1 0 10 100 2 90 2048 2 200 4096 1 1 1 1 1 1 -1 -1\n", "swf"),
        ('[{"QDate": 1}]', "htcondor"),
    ],
    ids=["tab", "comma-raw", "bom", "swf", "htcondor"],
)
@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_the_format_is_told_by_the_header(tmp_path, text, kind, packed):
    path = tmp_path / "log"
    data = text.encode()
    path.write_bytes(gzip.compress(data) if packed else data)
    assert job_log_format(path) == kind


def test_a_csv_that_is_not_a_trace_is_refused(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("alpha,beta,gamma\n1,2,3\n")
    with pytest.raises(JobLogError, match="or a Nextflow trace .* Got .*alpha,beta"):
        job_log_format(path)


def test_a_folder_of_traces_is_one_history_in_time_order(tmp_path):
    folder = tmp_path / "rnaseq"
    folder.mkdir()
    late = [r.replace("2024-03-01", "2024-03-08") for r in HUMAN_ROWS[:2]]
    late = [r.replace("ab/00000", "cd/00000") for r in late]
    # A resumed run lists the first FASTQC as CACHED: the same task, not a new one.
    cached = HUMAN_ROWS[0].replace("COMPLETED", "CACHED")
    (folder / "execution_trace_2.txt").write_text(trace_text([cached, *late]))
    (folder / "execution_trace_1.txt.gz").write_bytes(
        gzip.compress(trace_text(HUMAN_ROWS).encode())
    )
    (folder / "README.md").write_text("not a trace\n")
    assert job_log_format(folder) == "nextflow"
    frame, report = read_job_log(folder)
    assert len(report.files) == 2 and report.n_cached_duplicates == 1
    assert len(frame) == 7 and frame["submit_s"].is_monotonic_increasing
    assert set(frame["user"]) == {"rnaseq"}
    assert list(frame["trace_file"][-2:]) == ["execution_trace_2.txt"] * 2
    assert "(2 trace files)" in report.lines()[0]
    (tmp_path / "KTH.swf").write_text("; Version: 2.2\n")
    (tmp_path / "lone_trace.tsv").write_text(trace_text(HUMAN_ROWS))
    assert [p.name for p in job_logs_in(tmp_path)] == [
        "KTH.swf",
        "lone_trace.tsv",
        "rnaseq",
    ]


def test_traces_joined_into_one_file_read_as_the_traces_themselves(tmp_path):
    # cat run1.txt run2.txt > all.txt, where run 2 resumed run 1 and the first
    # FASTQC ran again verbatim (the same attempt listed twice).
    later = [r.replace("2024-03-01", "2024-03-08") for r in HUMAN_ROWS[1:]]
    later = [r.replace("ab/00000", "cd/00000") for r in later]
    joined = tmp_path / "all.txt"
    joined.write_text(trace_text(HUMAN_ROWS) + trace_text([HUMAN_ROWS[0], *later]))
    frame, report = read_nextflow_trace(joined)
    assert report.n_repeated_headers == 1 and report.n_duplicate == 1
    assert len(frame) == 9 and frame["submit_s"].is_monotonic_increasing
    lines = report.lines()
    assert "header repeated 1 more time (traces joined into one file), skipped" in lines
    assert any(line.startswith("duplicate rows skipped: 1 ") for line in lines)
    # The same attempt in a copy of the trace inside a folder counts once too.
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "trace_a.txt").write_text(trace_text(HUMAN_ROWS))
    (folder / "trace_b.txt").write_text(trace_text(HUMAN_ROWS))
    frame, report = read_job_log(folder)
    assert len(frame) == 5 and report.n_duplicate == 5


def test_a_trace_without_repeats_says_nothing_of_them(human):
    _, report = read_nextflow_trace(human)
    assert (report.n_repeated_headers, report.n_duplicate) == (0, 0)
    assert not any("repeated" in x or "duplicate" in x for x in report.lines())


def test_a_folder_without_traces_is_refused(tmp_path):
    with pytest.raises(JobLogError, match="must hold Nextflow trace files"):
        read_job_log(tmp_path)


def test_benchmark_reports_ramcount_and_iointensity_on_a_synthetic_trace(tmp_path):
    from benchmarks.synthetic_nextflow import write_trace
    from panda_predictor.cli.benchmark import benchmark
    from panda_predictor.settings import load_settings

    path = write_trace(tmp_path / "synthetic_trace.txt", 400, seed=3)
    settings = load_settings(home=tmp_path / "home")
    result = CliRunner().invoke(
        benchmark,
        [
            "--log",
            str(path),
            "--n-estimators",
            "15",
            "--half-life",
            "none",
            "--no-mlflow",
        ],
        obj=settings,
    )
    assert result.exit_code == 0, result.output
    for section in ("walltime", "cputime", "ramcount", "iointensity"):
        assert f"### {section}" in result.output
    assert "### replay: ramcount" in result.output
    assert "replay: n/a for iointensity" in result.output
    assert "over-alloc (kBPerS)" in result.output


def test_a_quoted_comma_separated_export_keeps_names_with_commas(tmp_path):
    rows = [r.replace("NF:FASTQC (s1)", '"NF:FASTQC (s1, lane 2)"') for r in RAW_ROWS]
    path = tmp_path / "export.csv"
    path.write_text(trace_text(rows, sep=","))
    frame, _ = read_job_log(path)
    assert frame.loc[0, "instance"] == "s1" and frame.loc[0, "run_s"] == 120.0
    bad = tmp_path / "short.csv"
    bad.write_text(trace_text([rows[0], rows[1].rsplit("|", 1)[0]], sep=","))
    with pytest.raises(JobLogError, match="Got 22 at line 3"):
        read_job_log(bad)


def test_trace_files_are_found_by_their_header_not_only_their_name(tmp_path):
    import gzip

    from panda_predictor.ingest.nextflow import is_nextflow_header, trace_files

    header = "task_id\thash\tname\tstatus\texit\n"
    assert is_nextflow_header(header)
    assert is_nextflow_header('"task_id","name","peak_rss"')
    assert not is_nextflow_header("task_id\tcolour\tsize")
    (tmp_path / "b.txt").write_text(header)
    (tmp_path / "a.trace.gz").write_bytes(gzip.compress(("\ufeff" + header).encode()))
    (tmp_path / "notes.txt").write_text("not a trace\n")
    (tmp_path / "run.log").write_text(header)  # not a trace file's suffix
    (tmp_path / "cut.txt.gz").write_bytes(gzip.compress(header.encode() * 400)[:30])
    (tmp_path / "folder.txt").mkdir()

    assert [p.name for p in trace_files(tmp_path)] == ["a.trace.gz", "b.txt"]
