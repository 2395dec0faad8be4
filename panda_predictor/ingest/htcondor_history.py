"""Read HTCondor job history (``condor_history -json``) into the job frame.

``condor_history -json`` prints a JSON array of job ClassAds; ``-jsonl`` (and tools
such as ``condor_adstash``) one ad per line. Both are read, plain or gzip, and so
are several arrays appended to one file (one per schedd). Each
ad becomes one row of the same job frame the SWF reader builds, so a site's own
HTCondor history runs through the benchmark like an archive log.

Mapping (ClassAd attribute names are case-insensitive, as in HTCondor; the full
table with units is in ``docs/job-logs.md``):

- ``user`` Owner; ``group`` AcctGroup, else AccountingGroup; ``executable`` the
  basename of Cmd; ``partition`` not recorded (no submit-time partition).
- ``queue`` JobUniverse as its name (``vanilla``, ``grid``, ...): HTCondor has no
  queues, and the universe is the one submit-time class every ad has;
  ``queue_attribute`` names another (a site's ``+Queue``, say).
- ``req_procs`` RequestCpus; ``req_memory_mb`` RequestMemory (MB, whole job) /
  RequestCpus; ``req_time_s`` AllowedJobDuration (s), else MaxWallTimeMins * 60.
- ``submit_s``/``submit_time`` QDate (unix seconds, UTC); ``wait_s`` JobStartDate
  (else JobCurrentStartDate) - QDate; ``run_s`` RemoteWallClockTime, else
  CompletionDate - start.
- ``procs`` CpusProvisioned, else RequestCpus; ``cpu_s`` (RemoteUserCpu +
  RemoteSysCpu) / procs; ``used_memory_mb`` MemoryUsage (MB), else
  ResidentSetSize (KiB) / 1024, divided by procs.
- ``finish_s`` CompletionDate; else, for a removed or completed job,
  EnteredCurrentStatus; else start + run, the wait assumed where no start is
  recorded (``wait_assumed``).
- ``status`` JobStatus 4 (completed) -> 1, 3 (removed) -> 5, any other -> 0.
- ``job_id`` the ad's position in the file (1, 2, ...); added column
  ``global_job_id`` GlobalJobId, else ``ClusterId.ProcId``. An ad whose
  GlobalJobId an earlier ad had is the same job exported twice: skipped and
  counted.

A missing attribute, ``null``, a date of 0 (HTCondor's "never") or an unevaluated
expression (``"/Expr(...)/"``, e.g. the default ``MemoryUsage``) becomes ``NaN``
and is counted in :class:`HtcondorReport`; negative and absurd values are set
aside and counted as the SWF reader does.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.ingest.files import JobLogError, is_gzip, open_text
from panda_predictor.ingest.frame import (
    ASSUMED_WAIT_S,
    check_assumed_wait,
    finish_times,
    string_categories,
)
from panda_predictor.ingest.report import JobLogReport

#: HTCondor's ``JobUniverse`` numbers and their names.
UNIVERSES: dict[int, str] = {
    1: "standard",
    2: "pipe",
    3: "linda",
    4: "pvm",
    5: "vanilla",
    6: "pvmd",
    7: "scheduler",
    8: "mpi",
    9: "grid",
    10: "java",
    11: "parallel",
    12: "local",
    13: "vm",
}
#: ``JobStatus`` -> SWF status (1 completed, 5 cancelled; any other state is 0).
STATUSES: dict[int, float] = {4: 1.0, 3: 5.0}
#: ``JobStatus`` values that end a job (removed, completed).
FINAL_STATUSES: frozenset[int] = frozenset({3, 4})
#: Column -> the attributes it is read from, for the report.
SOURCES: dict[str, tuple[str, ...]] = {
    "user": ("Owner",),
    "group": ("AcctGroup", "AccountingGroup"),
    "executable": ("Cmd",),
    "req_procs": ("RequestCpus",),
    "req_memory_mb": ("RequestMemory",),
    "req_time_s": ("AllowedJobDuration", "MaxWallTimeMins"),
    "wait_s": ("JobStartDate", "JobCurrentStartDate"),
    "run_s": ("RemoteWallClockTime", "CompletionDate"),
    "cpu_s": ("RemoteUserCpu", "RemoteSysCpu"),
    "used_memory_mb": ("MemoryUsage", "ResidentSetSize"),
    "status": ("JobStatus",),
}
#: Attributes read besides those in :data:`SOURCES` (the queue's is added per call).
OTHER_ATTRIBUTES: tuple[str, ...] = (
    "QDate",
    "CpusProvisioned",
    "EnteredCurrentStatus",
    "GlobalJobId",
    "ClusterId",
    "ProcId",
)
#: Values above these are absurd (a year of time, a TB of memory per processor, a
#: million processors): counted, then treated as missing.
ABSURD_LIMITS: dict[str, float] = {
    "wait_s": 3.2e7,
    "run_s": 3.2e7,
    "cpu_s": 3.2e7,
    "req_time_s": 3.2e7,
    "req_memory_mb": 1e6,
    "used_memory_mb": 1e6,
    "req_procs": 1e6,
    "procs": 1e6,
}
#: The queue attribute when none is named.
DEFAULT_QUEUE_ATTRIBUTE = "JobUniverse"


@dataclass
class HtcondorReport(JobLogReport):
    """What the HTCondor history reader saw: records, missing and unusable values."""

    layout: str = ""
    compressed: bool = False
    n_records: int = 0
    queue_attribute: str = DEFAULT_QUEUE_ATTRIBUTE
    #: Column -> jobs for which none of its attributes gave a value.
    missing: Counter[str] = field(default_factory=Counter)
    #: Attribute -> values present but not usable (an expression, a wrong type).
    unparsed: Counter[str] = field(default_factory=Counter)

    def source_lines(self) -> list[str]:
        """Return the history's own lines: layout, records, missing attributes."""
        packing = "gzip" if self.compressed else "plain"
        out = [
            f"file: {self.path}",
            f"format: HTCondor history, {self.layout} ({packing})",
            f"records: {self.n_records} ({self.n_malformed} not job ads, skipped)",
            f"jobs: {self.n_jobs} ({self.n_without_submit_time} without a QDate, "
            "left out)",
        ]
        if self.n_duplicate:
            out.append(
                f"duplicate ads skipped: {self.n_duplicate} (a GlobalJobId an "
                "earlier ad already had)"
            )
        sources = {**SOURCES, "queue": (self.queue_attribute,)}
        for column, n in sorted(self.missing.items()):
            names = " or ".join(sources.get(column, (column,)))
            out.append(f"{column} not recorded for {n} jobs (no {names})")
        if self.unparsed:
            listed = ", ".join(f"{k}={v}" for k, v in sorted(self.unparsed.items()))
            out.append(
                "values neither a plain number nor text (an unevaluated expression), "
                f"read as not recorded: {listed}"
            )
        return out


def _keep_pairs(wanted: frozenset[str]) -> Callable[[list[tuple[str, Any]]], dict]:
    """Return a JSON object hook that keeps only the wanted attributes, lower-cased.

    ClassAd names are case-insensitive; dropping the other attributes while parsing
    keeps a history of a million ads (hundreds of attributes each) in memory.
    """

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        return {k.lower(): v for k, v in pairs if k.lower() in wanted}

    return hook


def _layout_error(path: Path, found: str) -> JobLogError:
    return JobLogError(
        "The HTCondor history must be condor_history -json output: a JSON array of "
        f"job ads, or one JSON object per line. Got {str(path)!r} with {found} "
        "instead."
    )


def _load_ads(
    path: Path, wanted: frozenset[str], report: HtcondorReport
) -> list[dict[str, Any]]:
    """Return the job ads of a JSON array or JSON-lines file, counting the rest."""
    hook = _keep_pairs(wanted)
    with open_text(path) as fh:
        try:
            text = fh.read()
        except EOFError:
            raise JobLogError(
                "The HTCondor history must be a complete gzip stream. Got a cut-off "
                f"file {str(path)!r} instead."
            ) from None
    text = text.removeprefix("\ufeff")
    body = text.lstrip(" \t\r\n")
    if body.startswith("["):
        arrays = _json_arrays(text, hook, path)
        report.layout = (
            "JSON array"
            if len(arrays) == 1
            else f"{len(arrays)} JSON arrays (histories appended to one file)"
        )
        values = [v for array in arrays for v in array]
    elif body.startswith("{"):
        report.layout = "JSON lines"
        values = _json_lines(text.splitlines(), hook, path)
    else:
        found = f"text starting {body[:40]!r}" if body else "no content"
        raise _layout_error(path, found)
    ads = [v for v in values if isinstance(v, dict)]
    report.n_records = len(values)
    report.n_malformed += len(values) - len(ads)
    return ads


#: Anything but JSON's whitespace: where the next appended array starts.
_NOT_BLANK = re.compile(r"[^ \t\r\n]")


def _json_arrays(text: str, hook: Callable, path: Path) -> list[list[Any]]:
    """Return the JSON arrays of ``text``, one after another.

    ``condor_history -json -name SCHEDD >> history.json`` for each schedd appends
    one array per schedd: each is read in turn. Anything else after an array is
    invalid JSON, named by its line and column.
    """
    decoder = json.JSONDecoder(object_pairs_hook=hook)
    arrays: list[list[Any]] = []
    at = 0
    try:
        while True:
            start = _NOT_BLANK.search(text, at)
            if start is None:
                return arrays
            at = start.start()
            if arrays and text[at] != "[":
                # Report it as json.loads would: extra data after the arrays.
                raise json.JSONDecodeError("Extra data", text, at)
            # Each value starts at a '[' (checked above and by the caller): a list.
            value, at = decoder.raw_decode(text, at)
            arrays.append(value)
    except json.JSONDecodeError as exc:
        raise _layout_error(
            path, f"invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})"
        ) from None


def _json_lines(lines: Iterable[str], hook: Callable, path: Path) -> list[Any]:
    """Return the values of JSON lines; a line that is not JSON becomes ``None``.

    A broken line (a log cut mid-write) costs that job only; a file in which no
    line is JSON is not JSON lines at all.
    """
    values: list[Any] = []
    first_error = ""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            values.append(json.loads(line, object_pairs_hook=hook))
        except json.JSONDecodeError as exc:
            values.append(None)
            first_error = first_error or f"line {number}: {exc.msg}"
    if values and all(v is None for v in values):
        raise _layout_error(path, f"no line that is JSON ({first_error})")
    return values


class _Columns:
    """Pull typed values out of job ads, counting each unusable one by attribute."""

    def __init__(self, ads: list[dict[str, Any]], report: HtcondorReport) -> None:
        self.ads = ads
        self.report = report

    def number(self, name: str, zero_is_missing: bool = False) -> np.ndarray:
        """Return a numeric attribute as floats (``NaN`` where unusable)."""
        key = name.lower()
        out = np.full(len(self.ads), np.nan)
        for i, ad in enumerate(self.ads):
            value = ad.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                self.report.unparsed[name] += 1
                continue
            out[i] = value
        if zero_is_missing:
            out[out == 0] = np.nan  # HTCondor's "never happened"
        return out

    def text(self, name: str, convert: Callable[[Any], str] = str) -> pd.Series:
        """Return a text attribute (numbers converted), ``None`` where unusable."""
        key = name.lower()
        out: list[str | None] = []
        for ad in self.ads:
            value = ad.get(key)
            if value is None or isinstance(value, bool | list | dict):
                if value is not None:
                    self.report.unparsed[name] += 1
                out.append(None)
            elif isinstance(value, str) and value.startswith(("/Expr(", "\\/Expr(")):
                self.report.unparsed[name] += 1
                out.append(None)
            else:
                out.append(convert(value))
        return pd.Series(out, dtype=object)


def _first(*columns: np.ndarray) -> np.ndarray:
    """Return, per job, the first of the columns that is not ``NaN``."""
    out = columns[0].copy()
    for col in columns[1:]:
        out = np.where(np.isnan(out), col, out)
    return out


def _universe(value: Any) -> str:
    number = int(value) if isinstance(value, int | float) else None
    return UNIVERSES.get(number, str(value)) if number is not None else str(value)


def _set_aside(frame: pd.DataFrame, report: HtcondorReport) -> None:
    """Count and blank negative and absurd values in place."""
    for column, limit in ABSURD_LIMITS.items():
        col = frame[column].to_numpy(dtype=float, copy=True)
        negative, absurd = col < 0, col > limit
        if negative.any():
            report.negative[column] += int(negative.sum())
        if absurd.any():
            report.absurd[column] += int(absurd.sum())
        col[negative | absurd] = np.nan
        frame[column] = col


def _frame(
    ads: list[dict[str, Any]], report: HtcondorReport, assumed_wait_s: float
) -> pd.DataFrame:
    """Map job ads onto job-frame rows (see the module doc), sorted by submit time.

    Ads without a usable ``QDate`` cannot be placed in time: they are counted in
    ``report.n_without_submit_time`` and left out.
    """
    ads, places = _first_ad_of_each_job(ads, report)
    qdate = _Columns(ads, report).number("QDate", zero_is_missing=True)
    keep = ~np.isnan(qdate)
    report.n_without_submit_time = int((~keep).sum())
    position = places[keep]
    qdate = qdate[keep]
    get = _Columns([ad for ad, k in zip(ads, keep, strict=True) if k], report)
    n = len(qdate)
    cpus = get.number("RequestCpus")
    procs = _first(get.number("CpusProvisioned"), cpus)
    per_proc = np.where(procs > 0, procs, np.nan)
    per_cpu = np.where(cpus > 0, cpus, np.nan)
    start = _first(
        get.number("JobStartDate", zero_is_missing=True),
        get.number("JobCurrentStartDate", zero_is_missing=True),
    )
    completion = get.number("CompletionDate", zero_is_missing=True)
    run = _first(get.number("RemoteWallClockTime"), completion - start)
    cpu = get.number("RemoteUserCpu") + get.number("RemoteSysCpu")
    used = _first(get.number("MemoryUsage"), get.number("ResidentSetSize") / 1024.0)
    status, ended = _status_and_end(get, completion)
    queue_attr = report.queue_attribute
    convert = _universe if queue_attr.lower() == "jobuniverse" else str
    frame = pd.DataFrame(
        {
            "job_id": position,
            "submit_s": qdate,
            "submit_time": pd.to_datetime(qdate, unit="s"),
            "user": string_categories(get.text("Owner")),
            "group": string_categories(
                get.text("AcctGroup").fillna(get.text("AccountingGroup"))
            ),
            "executable": string_categories(
                get.text("Cmd", lambda v: posixpath.basename(str(v)))
            ),
            "queue": string_categories(get.text(queue_attr, convert)),
            "partition": string_categories(pd.Series([None] * n, dtype=object)),
            "req_procs": cpus,
            "req_time_s": _first(
                get.number("AllowedJobDuration"), get.number("MaxWallTimeMins") * 60.0
            ),
            "req_memory_mb": get.number("RequestMemory") / per_cpu,
            "wait_s": start - qdate,
            "finish_s": np.nan,
            "procs": procs,
            "status": status,
            "run_s": run,
            "cpu_s": cpu / per_proc,
            "used_memory_mb": used / per_proc,
            "used_memory_total_mb": np.nan,
            "wait_assumed": False,
            "global_job_id": _global_job_ids(get),
        }
    )
    for column in SOURCES:
        missing = int(frame[column].isna().sum())
        if missing:
            report.missing[column] = missing
    _set_aside(frame, report)
    frame["used_memory_total_mb"] = frame["used_memory_mb"] * frame["procs"]
    _set_finish(frame, np.isnan(start), ended, assumed_wait_s)
    frame = frame.sort_values("submit_s", kind="stable")
    return frame.reset_index(drop=True)


def _first_ad_of_each_job(
    ads: list[dict[str, Any]], report: HtcondorReport
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Return each job's first ad and its place in the file (1, 2, ...).

    An ad whose GlobalJobId an earlier ad had is the same job exported twice (two
    overlapping condor_history runs joined): counted in ``report.n_duplicate`` and
    dropped before anything else is counted. Only the GlobalJobId says so; a local
    ClusterId.ProcId repeats across schedds.
    """
    seen: set[str] = set()
    kept: list[dict[str, Any]] = []
    places: list[float] = []
    for place, ad in enumerate(ads, start=1):
        global_id = ad.get("globaljobid")
        if isinstance(global_id, str):
            if global_id in seen:
                report.n_duplicate += 1
                continue
            seen.add(global_id)
        kept.append(ad)
        places.append(float(place))
    return kept, np.asarray(places, dtype=float)


def _status_and_end(
    get: _Columns, completion: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return each job's status code and when it ended (NaN: not yet).

    The completion date, else when a job entered a final status.
    """
    job_status = get.number("JobStatus")
    status = np.array(
        [STATUSES.get(int(s), 0.0) if not np.isnan(s) else np.nan for s in job_status]
    )
    entered = get.number("EnteredCurrentStatus", zero_is_missing=True)
    final = np.isin(job_status, list(FINAL_STATUSES))
    return status, _first(completion, np.where(final, entered, np.nan))


def _global_job_ids(get: _Columns) -> pd.Series:
    """Return each ad's GlobalJobId, else its local ``ClusterId.ProcId``."""
    ids = get.text("GlobalJobId")
    cluster, proc = get.number("ClusterId"), get.number("ProcId")
    local = [
        f"{c:.0f}.{p:.0f}" if not (np.isnan(c) or np.isnan(p)) else None
        for c, p in zip(cluster, proc, strict=True)
    ]
    return ids.where(ids.notna(), pd.Series(local, dtype=object))


def _set_finish(
    frame: pd.DataFrame,
    never_started: np.ndarray,
    ended: np.ndarray,
    assumed_wait_s: float,
) -> None:
    """Fill ``finish_s`` and ``wait_assumed``: when a job ended where known, else
    submit plus wait (assumed if it never started) plus run."""
    finish, assumed = finish_times(
        frame["submit_s"].to_numpy(dtype=float),
        frame["wait_s"].to_numpy(dtype=float),
        frame["run_s"].to_numpy(dtype=float),
        never_started,
        assumed_wait_s,
    )
    known = ~np.isnan(ended)
    frame["finish_s"] = np.where(known, ended, finish)
    frame["wait_assumed"] = assumed & ~known


def _check_queue_attribute(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
        raise JobLogError(
            "The 'queue_attribute' field must be a ClassAd attribute name. "
            f"Got {name!r} instead."
        )
    return name


def read_htcondor_history(
    path: str | Path,
    *,
    assumed_wait_s: float = ASSUMED_WAIT_S,
    queue_attribute: str = DEFAULT_QUEUE_ATTRIBUTE,
) -> tuple[pd.DataFrame, HtcondorReport]:
    """Read ``condor_history -json`` output (gzip or plain) into a job frame.

    :param path: a JSON array of job ads, or JSON lines (one ad per line).
    :param assumed_wait_s: the wait assumed where a job has no start date and no
        end date, so it still finishes (see :data:`ASSUMED_WAIT_S`).
    :param queue_attribute: the attribute that becomes ``queue`` (default the
        universe; ``JobUniverse`` numbers become their names).
    """
    assumed_wait_s = check_assumed_wait(assumed_wait_s)
    queue_attribute = _check_queue_attribute(queue_attribute)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"The HTCondor history file must exist. Got {str(path)!r} instead."
        )
    report = HtcondorReport(
        path=str(path),
        compressed=is_gzip(path),
        queue_attribute=queue_attribute,
        assumed_wait_s=assumed_wait_s,
    )
    names = [a for attrs in SOURCES.values() for a in attrs]
    names += [*OTHER_ATTRIBUTES, queue_attribute]
    ads = _load_ads(path, frozenset(a.lower() for a in names), report)
    frame = _frame(ads, report, assumed_wait_s)
    report.summarise(frame)
    return frame, report
