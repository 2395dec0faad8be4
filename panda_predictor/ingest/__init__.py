"""Readers that turn outside job logs into our job frame (adapters: read files).

:func:`read_job_log` reads any log we support, telling the format by content:
SWF text from the Parallel Workloads Archive, or HTCondor history as printed by
``condor_history -json`` / ``-jsonl``; either plain or gzip. Each reader returns
the same job frame (:mod:`panda_predictor.ingest.frame`) and a report of what it
saw (:class:`~panda_predictor.ingest.report.JobLogReport`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from panda_predictor.ingest.files import JobLogError, read_head
from panda_predictor.ingest.frame import ASSUMED_WAIT_S, JOB_FRAME_COLUMNS
from panda_predictor.ingest.htcondor_history import (
    HtcondorReport,
    read_htcondor_history,
)
from panda_predictor.ingest.report import JobLogReport, available_targets
from panda_predictor.ingest.swf import SwfReport, read_swf, trace_name

__all__ = [
    "ASSUMED_WAIT_S",
    "JOB_FRAME_COLUMNS",
    "HtcondorReport",
    "JobLogError",
    "JobLogReport",
    "SwfReport",
    "available_targets",
    "job_log_format",
    "read_htcondor_history",
    "read_job_log",
    "read_swf",
    "trace_name",
]


def _is_swf_line(line: str) -> bool:
    """Return whether a line is an SWF header comment or starts with a number."""
    if line.startswith(";"):
        return True
    first = line.split(maxsplit=1)[0] if line.split() else ""
    try:
        float(first)
    except ValueError:
        return False
    return True


def job_log_format(path: str | Path) -> str:
    """Return ``"swf"`` or ``"htcondor"`` for a job log, judged by its first bytes.

    Suffixes lie (archives rename, sites pipe ``condor_history`` into any name), so
    the content decides: a JSON array or object is HTCondor history, a ``;``
    header or a line starting with a number is SWF.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"The job log file must exist. Got {str(path)!r} instead."
        )
    try:
        head = read_head(path)
    except EOFError:
        raise JobLogError(
            f"The job log must be a complete gzip stream. Got a cut-off file "
            f"{str(path)!r} instead."
        ) from None
    body = head.lstrip("\ufeff \t\r\n")
    if body.startswith(("[", "{")):
        return "htcondor"
    if body and _is_swf_line(body.splitlines()[0].strip()):
        return "swf"
    found = f"text starting {body[:40]!r}" if body else "an empty file"
    raise JobLogError(
        "The job log must be SWF text or condor_history -json output (a JSON array "
        f"or JSON lines), plain or gzip. Got {str(path)!r} with {found} instead."
    )


def read_job_log(path: str | Path, **kw: Any) -> tuple[pd.DataFrame, JobLogReport]:
    """Read an SWF log or an HTCondor history into a job frame and its report.

    :param path: the log, plain or gzip; the format is told by content
        (:func:`job_log_format`).
    :param kw: passed to the format's reader (:func:`read_swf`,
        :func:`read_htcondor_history`), e.g. ``assumed_wait_s``.
    """
    if job_log_format(path) == "htcondor":
        return read_htcondor_history(path, **kw)
    return read_swf(path, **kw)
