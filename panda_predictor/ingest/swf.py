"""Read Standard Workload Format (SWF) job logs and map them onto our task model.

The Parallel Workloads Archive publishes real job logs in SWF: header comments that
start with ``;``, then one job per line with 18 whitespace-separated numbers, ``-1``
meaning "not recorded". Real files have blank lines, a truncated last line, negative
or absurd values, or the same job listed twice; the reader keeps every job it can
place in time, once, turns a bad value into "missing" and counts it in
:class:`SwfReport`, so nothing disappears silently.

Each job becomes a task with one job. Only fields known at submission (submit time,
requested processors, time and memory, user, group, executable, queue, partition)
become features; run time, CPU time and used memory become the targets ``walltime``,
``cputime`` and ``ramcount`` (our target names, in trace units: seconds, seconds per
processor, MB per processor). Wait time and allocated processors are kept for the
recency rule (a job counts as history only once it finished) and the replay, never
as features. A target the file does not record is "not available", never invented.

Some logs (LCG-2005-1, LLNL-Atlas-2006) record no wait time at all. A job's finish
is then ``submit + ASSUMED_WAIT_S + run`` (see :data:`ASSUMED_WAIT_S`), flagged in
the column ``wait_assumed`` and counted in the report; ``wait_s`` itself stays
missing, as the log has it. A wait the log records but the reader sets aside (negative,
absurd) is not replaced: that job's finish stays unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from panda_predictor.ingest.files import JobLogError, open_text
from panda_predictor.ingest.frame import (
    ASSUMED_WAIT_S,
    CATEGORICAL_FEATURES,
    MIN_RECORDED,
    NUMERIC_FEATURES,
    TRACE_TARGETS,
    check_assumed_wait,
    finish_times,
)
from panda_predictor.ingest.report import JobLogReport, available_targets

__all__ = [
    "ASSUMED_WAIT_S",
    "CATEGORICAL_FEATURES",
    "MIN_RECORDED",
    "NUMERIC_FEATURES",
    "SWF_FIELDS",
    "TRACE_TARGETS",
    "SwfReport",
    "available_targets",
    "parse_swf_lines",
    "read_swf",
    "to_task_frame",
    "trace_name",
]

#: The 18 SWF fields, in file order.
SWF_FIELDS: tuple[str, ...] = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_procs",
    "cpu_time",
    "used_memory",
    "requested_procs",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
)
#: Values above these are physically absurd for the machines in the archive (a year
#: of run time, a TB of memory per processor, a million processors): counted, then
#: treated as missing.
ABSURD_LIMITS: dict[str, float] = {
    "wait_time": 3.2e7,
    "run_time": 3.2e7,
    "cpu_time": 3.2e7,
    "requested_time": 3.2e7,
    "used_memory": 1e9,
    "requested_memory": 1e9,
    "allocated_procs": 1e6,
    "requested_procs": 1e6,
}


@dataclass
class SwfReport(JobLogReport):
    """What the SWF reader saw: header, lines, jobs and every value set aside."""

    header: dict[str, str] = field(default_factory=dict)
    n_lines: int = 0
    n_comments: int = 0
    n_blank: int = 0
    n_truncated: int = 0
    #: Kept lines whose job number an earlier, different line already had (logs
    #: merged with their numbering restarted): kept, since their jobs differ.
    n_repeated_number: int = 0
    #: Rows (in file order) whose recorded wait was set aside as impossible: their
    #: finish stays unknown instead of resting on the assumed wait.
    wait_set_aside: np.ndarray = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False, compare=False
    )

    def source_lines(self) -> list[str]:
        """Return the SWF lines: header, blank and malformed lines, jobs."""
        header = (
            f"{self.n_comments} header/comment"
            if self.n_comments
            else "no header (stripped)"
        )
        lines = [
            f"file: {self.path}",
            f"lines: {self.n_lines} ({header}, {self.n_blank} blank)",
            f"jobs: {self.n_jobs} ({self.n_truncated} truncated lines padded as "
            f"missing, {self.n_malformed} malformed lines skipped, "
            f"{self.n_without_submit_time} without a submit time)",
        ]
        # Said only where they occur: none of the archive's cleaned logs has either.
        if self.n_duplicate:
            lines.append(
                f"duplicate lines skipped: {self.n_duplicate} (equal, field for "
                "field, to an earlier job line)"
            )
        if self.n_repeated_number:
            lines.append(
                f"repeated job numbers: {self.n_repeated_number} (a line reusing "
                "an earlier line's job number with other values is kept as a job "
                "of its own)"
            )
        return lines


def parse_swf_lines(
    lines: Iterable[str], path: str = ""
) -> tuple[np.ndarray, SwfReport]:
    """Parse SWF text into an (n, 18) float array with NaN for missing values.

    A line with fewer than 18 fields (a truncated last line) is padded with missing
    values and counted; a line with non-numeric fields is counted and skipped; a
    line equal to an earlier job line is counted and skipped (the same job listed
    twice); a different line reusing a job number is counted and kept.
    """
    report = SwfReport(path=path)
    rows: list[list[float]] = []
    for line in lines:
        report.n_lines += 1
        text = line.strip()
        if not text:
            report.n_blank += 1
            continue
        if text.startswith(";"):
            report.n_comments += 1
            key, sep, value = text[1:].partition(":")
            if sep and key.strip() and " " not in key.strip():
                report.header.setdefault(key.strip(), value.strip())
            continue
        parts = text.split()
        try:
            values = [float(p) for p in parts[: len(SWF_FIELDS)]]
        except ValueError:
            report.n_malformed += 1
            continue
        if len(values) < len(SWF_FIELDS):
            report.n_truncated += 1
            values += [-1.0] * (len(SWF_FIELDS) - len(values))
        rows.append(values)
    data = _once(np.asarray(rows, dtype=float).reshape(-1, len(SWF_FIELDS)), report)
    _clean(data, report)
    return data, report


def _once(data: np.ndarray, report: SwfReport) -> np.ndarray:
    """Drop the rows equal to an earlier row (``n_duplicate``: a line equal to an
    earlier one, field for field, is the same job), count the job numbers that
    different rows share; return the rows kept, in file order."""
    repeated = pd.DataFrame(data).duplicated().to_numpy()
    report.n_duplicate = int(repeated.sum())
    data = data[~repeated]
    numbers = pd.Series(data[:, 0])
    report.n_repeated_number = int((numbers.duplicated() & (numbers != -1)).sum())
    return data


def _clean(data: np.ndarray, report: SwfReport) -> None:
    """Turn -1 into NaN; count and blank other negative and absurd values in place."""
    for j, name in enumerate(SWF_FIELDS):
        col = data[:, j]
        col[col == -1] = np.nan
        if name == "think_time":
            continue  # think time may be legitimately negative in some logs
        negative = col < 0
        if negative.any():
            report.negative[name] += int(negative.sum())
            col[negative] = np.nan
        limit = ABSURD_LIMITS.get(name)
        absurd = col > limit if limit is not None else np.zeros(len(col), bool)
        if absurd.any():
            report.absurd[name] += int(absurd.sum())
            col[absurd] = np.nan
        if name == "wait_time":
            report.wait_set_aside = np.flatnonzero(negative | absurd)


def _ids(col: np.ndarray) -> pd.Categorical:
    """Return SWF ids as string categories (missing stays missing)."""
    text = pd.Series(col).map(lambda v: "" if np.isnan(v) else str(int(v)))
    return pd.Categorical(text.replace("", np.nan))


def to_task_frame(
    data: np.ndarray, report: SwfReport, *, assumed_wait_s: float = ASSUMED_WAIT_S
) -> pd.DataFrame:
    """Map parsed SWF rows onto task rows: submission features, targets, bookkeeping.

    Rows without a submit time cannot be placed in time: they are counted in
    ``report.n_without_submit_time`` and left out. Rows are sorted by submit time.

    :param data: rows of :func:`parse_swf_lines`.
    :param report: its report; completed here (jobs, assumed waits, span, targets).
    :param assumed_wait_s: the wait assumed where the log records none (see
        :data:`ASSUMED_WAIT_S`), so such jobs still finish.
    """
    assumed_wait_s = check_assumed_wait(assumed_wait_s)
    f = {name: data[:, j] for j, name in enumerate(SWF_FIELDS)}
    not_recorded = np.isnan(f["wait_time"])
    not_recorded[report.wait_set_aside] = False
    keep = ~np.isnan(f["submit_time"])
    report.n_without_submit_time = int((~keep).sum())
    f = {k: v[keep] for k, v in f.items()}
    finish, assumed = finish_times(
        f["submit_time"],
        f["wait_time"],
        f["run_time"],
        not_recorded[keep],
        assumed_wait_s,
    )
    start_text = report.header.get("UnixStartTime", "")
    try:
        start = float(start_text)
    except ValueError:
        start = float("nan")
    # Without a (valid) start the offsets still order the jobs: count from 1970.
    report.start_known = bool(np.isfinite(start))
    start = start if report.start_known else 0.0
    procs = np.where(
        np.isnan(f["allocated_procs"]), f["requested_procs"], f["allocated_procs"]
    )
    frame = pd.DataFrame(
        {
            "job_id": f["job_number"],
            "submit_s": f["submit_time"],
            "submit_time": pd.to_datetime(start + f["submit_time"], unit="s"),
            "user": _ids(f["user_id"]),
            "group": _ids(f["group_id"]),
            "executable": _ids(f["executable"]),
            "queue": _ids(f["queue"]),
            "partition": _ids(f["partition"]),
            "req_procs": f["requested_procs"],
            "req_time_s": f["requested_time"],
            "req_memory_mb": f["requested_memory"] / 1024.0,
            # Not known at submission: never features.
            "wait_s": f["wait_time"],
            "finish_s": finish,
            "procs": procs,
            "status": f["status"],
            # Targets.
            "run_s": f["run_time"],
            "cpu_s": f["cpu_time"],
            "used_memory_mb": f["used_memory"] / 1024.0,
            "used_memory_total_mb": f["used_memory"] / 1024.0 * procs,
            # The finish rests on the assumed wait (the log records none).
            "wait_assumed": assumed,
        }
    )
    frame = frame.sort_values("submit_s", kind="stable").reset_index(drop=True)
    report.assumed_wait_s = assumed_wait_s
    report.summarise(frame)
    return frame


def read_swf(
    path: str | Path, *, assumed_wait_s: float = ASSUMED_WAIT_S
) -> tuple[pd.DataFrame, SwfReport]:
    """Read an SWF file (gzip or plain) into a task frame and a report of it.

    :param path: the SWF file.
    :param assumed_wait_s: the wait assumed where the log records none.
    """
    assumed_wait_s = check_assumed_wait(assumed_wait_s)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"The SWF file must exist. Got {str(path)!r} instead.")
    lines = open_text(path)
    try:
        data, report = parse_swf_lines(lines, str(path))
    except EOFError:
        raise JobLogError(
            f"The SWF file must be a complete gzip stream. Got a cut-off file "
            f"{str(path)!r} instead."
        ) from None
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    return to_task_frame(data, report, assumed_wait_s=assumed_wait_s), report


def trace_name(path: str | Path) -> str:
    """Return a short name of a job log (``LANL-CM5-1994-4.1-cln``, ``history``).

    Strips the compression and format suffixes the readers accept, so the SWF and
    the HTCondor history of one site can be told apart only by their stem.
    """
    name = Path(path).name
    for suffix in (".gz", ".swf", ".jsonl", ".json", ".txt", ".tsv", ".csv"):
        name = name.removesuffix(suffix)
    return name
