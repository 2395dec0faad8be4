"""Read Standard Workload Format (SWF) job logs and map them onto our task model.

The Parallel Workloads Archive publishes real job logs in SWF: header comments that
start with ``;``, then one job per line with 18 whitespace-separated numbers, ``-1``
meaning "not recorded". Real files have blank lines, a truncated last line, negative
or absurd values; the reader keeps every job it can place in time, turns a bad value
into "missing" and counts it in :class:`SwfReport`, so nothing disappears silently.

Each job becomes a task with one job. Only fields known at submission (submit time,
requested processors, time and memory, user, group, executable, queue, partition)
become features; run time, CPU time and used memory become the targets ``walltime``,
``cputime`` and ``ramcount`` (our target names, in trace units: seconds, seconds per
processor, MB per processor). Wait time and allocated processors are kept for the
recency rule (a job counts as history only once it finished) and the replay, never
as features. A target the file does not record is "not available", never invented.
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

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
#: Categorical submission-time features (SWF ids, kept as strings).
CATEGORICAL_FEATURES: tuple[str, ...] = (
    "user",
    "group",
    "executable",
    "queue",
    "partition",
)
#: Numeric submission-time features.
NUMERIC_FEATURES: tuple[str, ...] = ("req_procs", "req_time_s", "req_memory_mb")
#: Our target name -> (task-frame column, unit in trace data).
TRACE_TARGETS: dict[str, tuple[str, str]] = {
    "walltime": ("run_s", "s"),
    "cputime": ("cpu_s", "s per processor"),
    "ramcount": ("used_memory_mb", "MB per processor"),
    "iointensity": ("", "kBPerS"),
}
#: A target needs at least this many recorded jobs to count as available.
MIN_RECORDED = 50


@dataclass
class SwfReport:
    """What the reader saw: lines, jobs and every value it had to set aside."""

    path: str = ""
    header: dict[str, str] = field(default_factory=dict)
    n_lines: int = 0
    n_comments: int = 0
    n_blank: int = 0
    n_jobs: int = 0
    n_truncated: int = 0
    n_malformed: int = 0
    n_without_submit_time: int = 0
    negative: Counter[str] = field(default_factory=Counter)
    absurd: Counter[str] = field(default_factory=Counter)
    available_targets: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """Return a short human summary, one fact per line."""
        out = [
            f"file: {self.path}",
            f"lines: {self.n_lines} ({self.n_comments} header/comment, "
            f"{self.n_blank} blank)",
            f"jobs: {self.n_jobs} ({self.n_truncated} truncated lines padded as "
            f"missing, {self.n_malformed} malformed lines skipped, "
            f"{self.n_without_submit_time} without a submit time)",
        ]
        for kind, counts in (("negative", self.negative), ("absurd", self.absurd)):
            if counts:
                listed = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
                out.append(f"{kind} values set to missing: {listed}")
        for name in TRACE_TARGETS:
            n = self.available_targets.get(name, 0)
            state = f"{n} jobs" if n >= MIN_RECORDED else "not available"
            out.append(f"target {name}: {state}")
        return out


def _open_text(path: Path) -> Iterable[str]:
    """Return the lines of a gzip or plain text file (decided by its magic bytes)."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def parse_swf_lines(
    lines: Iterable[str], path: str = ""
) -> tuple[np.ndarray, SwfReport]:
    """Parse SWF text into an (n, 18) float array with NaN for missing values.

    A line with fewer than 18 fields (a truncated last line) is padded with missing
    values and counted; a line with non-numeric fields is counted and skipped.
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
    data = np.asarray(rows, dtype=float).reshape(-1, len(SWF_FIELDS))
    _clean(data, report)
    return data, report


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
        if limit is not None:
            absurd = col > limit
            if absurd.any():
                report.absurd[name] += int(absurd.sum())
                col[absurd] = np.nan


def _ids(col: np.ndarray) -> pd.Categorical:
    """Return SWF ids as string categories (missing stays missing)."""
    text = pd.Series(col).map(lambda v: "" if np.isnan(v) else str(int(v)))
    return pd.Categorical(text.replace("", np.nan))


def to_task_frame(data: np.ndarray, report: SwfReport) -> pd.DataFrame:
    """Map parsed SWF rows onto task rows: submission features, targets, bookkeeping.

    Rows without a submit time cannot be placed in time: they are counted in
    ``report.n_without_submit_time`` and left out. Rows are sorted by submit time.
    """
    f = {name: data[:, j] for j, name in enumerate(SWF_FIELDS)}
    keep = ~np.isnan(f["submit_time"])
    report.n_without_submit_time = int((~keep).sum())
    f = {k: v[keep] for k, v in f.items()}
    start = float(report.header.get("UnixStartTime", "0") or 0)
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
            "finish_s": f["submit_time"] + f["wait_time"] + f["run_time"],
            "procs": procs,
            "status": f["status"],
            # Targets.
            "run_s": f["run_time"],
            "cpu_s": f["cpu_time"],
            "used_memory_mb": f["used_memory"] / 1024.0,
            "used_memory_total_mb": f["used_memory"] / 1024.0 * procs,
        }
    )
    frame = frame.sort_values("submit_s", kind="stable").reset_index(drop=True)
    report.n_jobs = len(frame)
    report.available_targets = {
        name: int(frame[col].notna().sum()) if col else 0
        for name, (col, _) in TRACE_TARGETS.items()
    }
    return frame


def available_targets(report: SwfReport) -> list[str]:
    """Return the targets the file records for at least :data:`MIN_RECORDED` jobs."""
    return [t for t, n in report.available_targets.items() if n >= MIN_RECORDED]


def read_swf(path: str | Path) -> tuple[pd.DataFrame, SwfReport]:
    """Read an SWF file (gzip or plain) into a task frame and a report of it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"The SWF file must exist. Got {str(path)!r} instead.")
    lines = _open_text(path)
    try:
        data, report = parse_swf_lines(lines, str(path))
    except EOFError:
        raise ValueError(
            f"The SWF file must be a complete gzip stream. Got a cut-off file "
            f"{str(path)!r} instead."
        ) from None
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    return to_task_frame(data, report), report


def trace_name(path: str | Path) -> str:
    """Return a short name of a trace file (``LANL-CM5-1994-4.1-cln``)."""
    name = Path(path).name
    for suffix in (".gz", ".swf"):
        name = name.removesuffix(suffix)
    return name
