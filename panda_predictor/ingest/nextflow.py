"""Read Nextflow trace files (``-with-trace``) into the job frame, task by task.

A trace is a table with a header naming its fields (``trace.fields``), tab-separated
as Nextflow writes it or comma-separated as some tools export it; values are
human-readable or raw (``trace.raw = true``), see
:mod:`panda_predictor.ingest.nextflow_values`. One row is one task attempt. A folder
of traces of one pipeline is one history in time order. The mapping (the full table
is in ``docs/job-logs.md``):

- ``executable`` the ``process`` (else the ``name`` without its `` (tag)``);
  ``instance`` the ``tag`` (else the ``name``); ``queue`` the ``queue``;
  ``user`` the history's name (the folder, else the file): a trace names no user,
  and the history features key on one.
- ``req_procs``/``procs`` ``cpus`` (Nextflow's default 1 where not recorded);
  ``req_memory_mb`` ``memory`` / cpus; ``req_time_s`` ``time``.
- ``submit_s`` ``submit``; ``wait_s`` ``start`` - ``submit``; ``finish_s``
  ``complete``, else ``submit`` + ``duration``, else start + run, the wait assumed
  where no start is recorded (``wait_assumed``), as for SWF.
- Labels of a completed task (``COMPLETED``, or ``CACHED`` not seen run elsewhere):
  ``run_s`` ``realtime``; ``cpu_s`` ``%cpu`` / 100 x realtime / cpus;
  ``used_memory_mb`` ``peak_rss`` / cpus; ``io_kbps`` (``rchar`` + ``wchar``, else
  ``read_bytes`` + ``write_bytes``) / 1024 / realtime / cpus, in kBPerS.
- A failed attempt (``FAILED``, ``ABORTED``) has no labels: what it measured is a
  lower bound (``run_at_least_s``, ``used_memory_at_least_mb``), raised to the
  request when ``exit`` says it was killed for memory (137) or time (140).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from panda_predictor.ingest.files import JobLogError, open_text
from panda_predictor.ingest.frame import (
    ASSUMED_WAIT_S,
    check_assumed_wait,
    finish_times,
)
from panda_predictor.ingest.nextflow_values import (
    Cells,
    durations,
    integers,
    percents,
    sizes,
    timestamps,
)
from panda_predictor.ingest.report import JobLogReport

#: Every field of Nextflow's trace file (``trace.fields``), for telling it by header.
NEXTFLOW_FIELDS: frozenset[str] = frozenset(
    {
        *("task_id", "hash", "native_id", "process", "tag", "name", "status"),
        *("exit", "module", "container", "cpus", "time", "disk", "memory"),
        *("attempt", "submit", "start", "complete", "duration", "realtime"),
        *("queue", "%cpu", "%mem", "rss", "vmem", "peak_rss", "peak_vmem"),
        *("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes"),
        *("vol_ctxt", "inv_ctxt", "env", "workdir", "script", "scratch"),
        *("error_action", "hostname", "cpu_model", "accelerator"),
        "accelerator_type",
    }
)
#: A header naming at least this many trace fields is a Nextflow trace.
MIN_KNOWN_FIELDS = 2
#: Statuses of a task that ran to its end; its measurements are labels.
DONE = frozenset({"COMPLETED", "CACHED"})
#: Status -> the job frame's (SWF) status code; any other status is 0.
STATUS_CODES: dict[str, float] = {"COMPLETED": 1.0, "CACHED": 1.0, "ABORTED": 5.0}
#: Exit codes of a task killed for exceeding its memory or its time.
KILLED_FOR: dict[int, str] = {137: "memory", 140: "time"}
#: The file suffixes a trace file may have (besides ``.gz``).
TRACE_SUFFIXES = (".txt", ".tsv", ".csv", ".trace")
MB = 1024.0**2


@dataclass
class NextflowReport(JobLogReport):
    """What the Nextflow reader saw: files, layout, attempts, cached and failed."""

    files: list[str] = field(default_factory=list)
    layouts: list[str] = field(default_factory=list)
    n_lines: int = 0
    n_blank: int = 0
    #: Header fields this reader does not use (unknown or not needed), ignored.
    ignored_fields: list[str] = field(default_factory=list)
    n_failed: int = 0
    n_killed: dict[str, int] = field(default_factory=dict)
    n_retries: int = 0
    n_cached_duplicates: int = 0
    n_not_finished: int = 0
    #: Lines equal to their file's header after its first line: traces joined
    #: into one file (``cat trace-*.txt``), each header skipped.
    n_repeated_headers: int = 0

    def source_lines(self) -> list[str]:
        """Return the trace's own lines: files, attempts, what was ignored."""
        layouts = ", ".join(sorted(set(self.layouts)))
        killed = ", ".join(f"{n} for {k}" for k, n in sorted(self.n_killed.items()))
        out = [
            f"file: {self.path}"
            + (f" ({len(self.files)} trace files)" if len(self.files) > 1 else ""),
            f"format: Nextflow trace, {layouts}",
            f"lines: {self.n_lines} ({self.n_blank} blank)",
            f"jobs: {self.n_jobs} task attempts ({self.n_retries} retries; "
            f"{self.n_without_submit_time} never submitted, left out; "
            f"{self.n_cached_duplicates} cached copies of a task run in another "
            "file, left out)",
            f"failed attempts: {self.n_failed} (killed: {killed or 'none'}), kept "
            "as lower bounds, never as labels",
        ]
        if self.n_not_finished:
            out.append(
                f"not finished when the trace was written: {self.n_not_finished}"
            )
        if self.n_repeated_headers:
            times = "time" if self.n_repeated_headers == 1 else "times"
            out.append(
                f"header repeated {self.n_repeated_headers} more {times} (traces "
                "joined into one file), skipped"
            )
        if self.n_duplicate:
            out.append(
                f"duplicate rows skipped: {self.n_duplicate} (a task attempt listed "
                "again, field for field)"
            )
        if self.ignored_fields:
            out.append(f"fields not used: {', '.join(self.ignored_fields)}")
        return out


def is_nextflow_header(line: str) -> bool:
    """Return whether a line is a trace header: it names Nextflow trace fields."""
    names = _header_names(line)
    return sum(n in NEXTFLOW_FIELDS for n in names) >= MIN_KNOWN_FIELDS


def _header_names(line: str) -> list[str]:
    delimiter = "\t" if "\t" in line else ","
    return [n.strip().strip('"').lower() for n in line.strip("\r\n").split(delimiter)]


def trace_files(folder: Path) -> list[Path]:
    """Return the Nextflow trace files directly in ``folder``, by name."""
    from panda_predictor.ingest.files import read_head

    out = []
    for path in sorted(folder.iterdir()):
        if not path.is_file() or not path.name.removesuffix(".gz").endswith(
            TRACE_SUFFIXES
        ):
            continue
        try:
            head = read_head(path).lstrip("\ufeff \t\r\n")
        except EOFError:
            head = ""
        if head and is_nextflow_header(head.splitlines()[0]):
            out.append(path)
    return out


def _read_table(
    path: Path, report: NextflowReport
) -> tuple[list[str], list[np.ndarray], np.ndarray]:
    """Return the header, the columns and each row's line number of one trace."""
    try:
        with open_text(path) as fh:
            text = fh.read()
    except EOFError:
        raise JobLogError(
            f"The Nextflow trace must be a complete gzip stream. Got a cut-off file "
            f"{str(path)!r} instead."
        ) from None
    lines = text.removeprefix("\ufeff").splitlines()
    report.n_lines += len(lines)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or not is_nextflow_header(lines[first]):
        found = repr(lines[first][:60]) if first is not None else "an empty file"
        raise JobLogError(
            "The Nextflow trace must start with a header naming its fields "
            f"(task_id, name, status, submit, ...). Got {found} in {str(path)!r} "
            "instead."
        )
    delimiter = "\t" if "\t" in lines[first] else ","
    report.layouts.append("tab-separated" if delimiter == "\t" else "comma-separated")
    header = _header_names(lines[first])
    # Traces joined with cat: the same header again starts the next trace.
    again = lines[first].strip()
    filled = [
        (i + 1, line)
        for i in range(first + 1, len(lines))
        if (line := lines[i].strip())
    ]
    report.n_blank += len(lines) - first - 1 - len(filled)
    numbers = [number for number, line in filled if line != again]
    report.n_repeated_headers += len(filled) - len(numbers)
    body = [lines[i - 1] for i in numbers]
    # Without quotes a line's fields are its separators + 1; quoted (comma-separated
    # exports may quote a name holding a comma) lines go through the csv module.
    quoted = delimiter == "," and any('"' in b for b in body)
    if quoted:
        rows = list(csv.reader(body))
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    else:
        lengths = np.fromiter(
            (b.count(delimiter) + 1 for b in body), np.int64, len(body)
        )
    wrong = np.flatnonzero(lengths != len(header))
    if wrong.size:
        raise JobLogError(
            f"A trace line must have as many fields as its header ({len(header)}). "
            f"Got {lengths[wrong[0]]} at line {numbers[wrong[0]]} of {path} instead."
        )
    if not body:
        return header, [np.zeros(0, object) for _ in header], np.zeros(0, np.int64)
    if not quoted:
        # pandas' C parser splits the checked lines at once.
        table = pd.read_csv(
            io.StringIO("\n".join(body)),
            sep=delimiter,
            header=None,
            dtype=object,
            na_filter=False,
            quoting=csv.QUOTE_NONE,
            skip_blank_lines=False,
            engine="c",
        )
        columns = [table[j].to_numpy(dtype=object) for j in range(len(header))]
    else:
        columns = [np.asarray(c, dtype=object) for c in zip(*rows, strict=True)]
    return header, columns, np.asarray(numbers, dtype=np.int64)


def _parse_file(path: Path, report: NextflowReport) -> pd.DataFrame:
    """Return one trace file's tasks as parsed fields (``NaN``/None = missing)."""
    header, columns, lines = _read_table(path, report)
    where = {name: j for j, name in enumerate(header)}
    missing = [f for f in ("submit",) if f not in where]
    if "process" not in where and "name" not in where:
        missing.append("process' or 'name")
    if missing:
        raise JobLogError(
            f"The Nextflow trace header must name the field '{missing[0]}'. Got the "
            f"fields {header} at line {lines[0] - 1 if lines.size else 1} of {path} "
            "instead."
        )
    n = len(lines)

    def cells(name: str) -> Cells | None:
        if name not in where:
            return None
        return Cells(str(path), name, columns[where[name]], lines)

    def text(name: str) -> pd.Series:
        c = cells(name)
        if c is None:
            return pd.Series([None] * n, dtype=object)
        return pd.Series(c.texts(), dtype=object)

    def number(name: str, parse, *args) -> np.ndarray:
        c = cells(name)
        return np.full(n, np.nan) if c is None else parse(c, *args)

    used = {
        "name": text("name"),
        "process": text("process"),
        "tag": text("tag"),
        "status": text("status").str.upper(),
        "hash": text("hash"),
        "queue": text("queue"),
        "task_id": text("task_id"),
        "cpus": number("cpus", integers, 1),
        "attempt": number("attempt", integers, 1),
        "exit": number("exit", integers),
        "memory": number("memory", sizes),
        "time": number("time", durations),
        "submit": number("submit", timestamps),
        "start": number("start", timestamps),
        "complete": number("complete", timestamps),
        "duration": number("duration", durations),
        "realtime": number("realtime", durations),
        "cpu_percent": number("%cpu", percents),
        "peak_rss": number("peak_rss", sizes),
    }
    io = ("rchar", "wchar") if {"rchar", "wchar"} & set(where) else ()
    io = io or ("read_bytes", "write_bytes")
    parts = [number(name, sizes) for name in io if name in where]
    used["io_bytes"] = np.sum(parts, axis=0) if parts else np.full(n, np.nan)
    read = set(used) | {"%cpu", *io}
    for name in header:
        if name not in read and name not in report.ignored_fields:
            report.ignored_fields.append(name)
    frame = pd.DataFrame(used)
    frame["line"] = lines
    frame["trace_file"] = path.name
    submit_missing = np.isnan(frame["submit"].to_numpy())
    done = frame["status"].isin(DONE).to_numpy()
    if (submit_missing & done).any():
        row = int(np.flatnonzero(submit_missing & done)[0])
        raise JobLogError(
            "The 'submit' field of a completed task must be a timestamp: "
            "'YYYY-MM-DD HH:MM:SS.mmm' or epoch milliseconds. Got "
            f"{columns[where['submit']][row]!r} at line {lines[row]} of {path} instead."
        )
    return frame


def _nothing(n: int) -> pd.Categorical:
    """Return a categorical column of ``n`` missing values."""
    return pd.Categorical.from_codes(np.full(n, -1, np.int64), [])


def _process_of(name: pd.Series) -> pd.Series:
    """Return the process of a task name: ``FASTQC (sample1)`` -> ``FASTQC``."""
    return name.str.replace(r"\s*\([^()]*\)\s*$", "", regex=True)


def _jobs(
    raw: pd.DataFrame, report: NextflowReport, history: str, assumed_wait_s: float
) -> pd.DataFrame:
    """Map parsed trace rows onto the job frame (see the module doc)."""
    raw, done = _kept_rows(raw, report)
    status, exit_code = raw["status"], raw["exit"].to_numpy()
    submit, start = raw["submit"].to_numpy(), raw["start"].to_numpy()
    complete = raw["complete"].to_numpy()
    cpus = np.nan_to_num(raw["cpus"].to_numpy(), nan=1.0)
    realtime = raw["realtime"].to_numpy()
    realtime = np.where(np.isnan(realtime), complete - start, realtime)
    failed = ~done & status.isin(["FAILED", "ABORTED"]).to_numpy()
    finished = done | failed
    report.n_not_finished += int((~finished).sum())
    wait = start - submit
    finish, assumed = _finish_s(raw, wait, realtime, finished, assumed_wait_s)
    req_memory = raw["memory"].to_numpy() / MB / cpus
    req_time = raw["time"].to_numpy()
    memory = raw["peak_rss"].to_numpy() / MB / cpus
    cpu = raw["cpu_percent"].to_numpy() / 100.0 * realtime / cpus
    positive = np.where(realtime > 0, realtime, np.nan)
    io = raw["io_bytes"].to_numpy() / 1024.0 / positive / cpus
    killed = _killed_for(exit_code, failed, report)
    by_memory, by_time = killed == "memory", killed == "time"
    report.n_retries += int((raw["attempt"].to_numpy() > 1).sum())
    process = _process_names(raw)
    instance = raw["tag"].fillna(raw["name"])
    task_id = pd.to_numeric(raw["task_id"], errors="coerce").to_numpy(dtype=float)

    def label(values: np.ndarray) -> np.ndarray:
        return np.where(done, values, np.nan)

    def at_least(values: np.ndarray, request: np.ndarray, raise_to: np.ndarray):
        bound = np.where(raise_to, np.fmax(values, request), values)
        return np.where(failed, bound, np.nan)

    n = len(raw)
    return pd.DataFrame(
        {
            "job_id": np.where(np.isnan(task_id), np.arange(1.0, n + 1), task_id),
            "submit_s": submit,
            "submit_time": pd.to_datetime(submit, unit="s"),
            "user": pd.Categorical.from_codes(np.zeros(n, np.int64), [history]),
            "group": _nothing(n),
            "executable": pd.Categorical(process.to_numpy(dtype=object)),
            "queue": pd.Categorical(raw["queue"].to_numpy(dtype=object)),
            "partition": _nothing(n),
            "req_procs": cpus,
            "req_time_s": req_time,
            "req_memory_mb": req_memory,
            "wait_s": wait,
            "finish_s": finish,
            "procs": cpus,
            "status": status.map(STATUS_CODES).fillna(0.0).to_numpy(dtype=float),
            "run_s": label(realtime),
            "cpu_s": label(cpu),
            "used_memory_mb": label(memory),
            "used_memory_total_mb": label(memory * cpus),
            "wait_assumed": assumed,
            # Added by this reader.
            "io_kbps": label(io),
            "req_io_kbps": np.full(n, np.nan),
            "instance": instance.to_numpy(dtype=object),
            "attempt": raw["attempt"].to_numpy(),
            "exit": exit_code,
            "killed_for": killed,
            "run_at_least_s": at_least(realtime, req_time, by_time),
            "used_memory_at_least_mb": at_least(memory, req_memory, by_memory),
            "hash": raw["hash"].to_numpy(dtype=object),
            "trace_file": raw["trace_file"].to_numpy(dtype=object),
            "line": raw["line"].to_numpy(),
        }
    )


def _kept_rows(
    raw: pd.DataFrame, report: NextflowReport
) -> tuple[pd.DataFrame, np.ndarray]:
    """Return the rows that are jobs, and which of them completed.

    A row equal, field for field, to an earlier one (the same attempt listed
    again: a trace joined twice, a copy in the folder) is dropped, a cached copy
    of a task that also ran too, and so is a row without a submit time (it never
    reached an executor); each is counted in ``report``.
    """
    fields = [c for c in raw.columns if c not in ("line", "trace_file")]
    repeated = raw.duplicated(subset=fields).to_numpy()
    report.n_duplicate += int(repeated.sum())
    raw = raw[~repeated]
    status = raw["status"]
    has_status = status.notna().to_numpy()
    exit_code = raw["exit"].to_numpy()
    # Without a status the exit code decides; without either, the task completed.
    done = np.where(
        has_status, status.isin(DONE), np.isnan(exit_code) | (exit_code == 0)
    )
    if raw["hash"].notna().any():
        ran = set(raw.loc[done & (status != "CACHED").to_numpy(), "hash"].dropna())
        copy = (status == "CACHED").to_numpy() & raw["hash"].isin(ran).to_numpy()
        report.n_cached_duplicates += int(copy.sum())
        raw, done = raw[~copy], done[~copy]
    never = np.isnan(raw["submit"].to_numpy())
    report.n_without_submit_time += int(never.sum())
    return raw[~never].reset_index(drop=True), done[~never]


def _finish_s(
    raw: pd.DataFrame,
    wait: np.ndarray,
    realtime: np.ndarray,
    finished: np.ndarray,
    assumed_wait_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Return each job's finish time (NaN if it did not finish) and whether it
    rests on an assumed wait.

    The trace's completion time where given, else submit plus duration, else the
    run after the (assumed) wait.
    """
    submit, start = raw["submit"].to_numpy(), raw["start"].to_numpy()
    complete = raw["complete"].to_numpy()
    by_run, assumed = finish_times(
        submit, wait, realtime, np.isnan(start), assumed_wait_s
    )
    by_duration = submit + raw["duration"].to_numpy()
    finish = np.where(np.isnan(complete), by_duration, complete)
    assumed = assumed & np.isnan(finish) & finished
    finish = np.where(np.isnan(finish), by_run, finish)
    return np.where(finished, finish, np.nan), assumed


def _killed_for(
    exit_code: np.ndarray, failed: np.ndarray, report: NextflowReport
) -> np.ndarray:
    """Return what each failed job was killed for (``memory``, ``time``) or None,
    counting the failures in ``report``."""
    killed = np.full(len(exit_code), None, dtype=object)
    for code, kind in KILLED_FOR.items():
        killed[failed & (exit_code == code)] = kind
    report.n_failed += int(failed.sum())
    for kind in KILLED_FOR.values():
        if (killed == kind).any():
            report.n_killed[kind] = report.n_killed.get(kind, 0) + int(
                (killed == kind).sum()
            )
    return killed


def _process_names(raw: pd.DataFrame) -> pd.Series:
    """Return each job's process, taken from its name where the trace has none."""
    process = raw["process"].copy()
    unnamed = process.isna().to_numpy()
    if unnamed.any():
        process[unnamed] = _process_of(raw["name"][unnamed])
    return process


def read_nextflow_trace(
    path: str | Path, *, assumed_wait_s: float = ASSUMED_WAIT_S
) -> tuple[pd.DataFrame, NextflowReport]:
    """Read a Nextflow trace file, or a folder of them, into a job frame.

    Every file is read and checked before any row is kept, so a folder with one bad
    file fails as a whole.

    :param path: a trace file (plain or gzip) or a folder of one pipeline's traces
        (one history, in time order).
    :param assumed_wait_s: the wait assumed where a task has no start, no complete
        and no duration (see :data:`ASSUMED_WAIT_S`).
    """
    from panda_predictor.ingest.swf import trace_name

    assumed_wait_s = check_assumed_wait(assumed_wait_s)
    path = Path(path)
    if path.is_dir():
        files = trace_files(path)
        if not files:
            raise JobLogError(
                "The folder must hold Nextflow trace files (*.txt, *.tsv, *.csv, "
                f"plain or gzip, with a trace header). Got none in {str(path)!r} "
                "instead."
            )
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(
            f"The Nextflow trace must exist. Got {str(path)!r} instead."
        )
    report = NextflowReport(
        path=str(path), files=[str(f) for f in files], assumed_wait_s=assumed_wait_s
    )
    raw = pd.concat([_parse_file(f, report) for f in files], ignore_index=True)
    frame = _jobs(raw, report, trace_name(path), assumed_wait_s)
    frame = frame.sort_values("submit_s", kind="stable").reset_index(drop=True)
    report.summarise(frame)
    return frame, report
