"""Readers that turn outside job logs into our job frame (adapters: read files).

:func:`read_job_log` reads any log we support, telling the format by content:
SWF text from the Parallel Workloads Archive, HTCondor history as printed by
``condor_history -json`` / ``-jsonl``, or a Nextflow trace file (or a folder of
them); each plain or gzip. Each reader returns
the same job frame (:mod:`panda_predictor.ingest.frame`) and a report of what it
saw (:class:`~panda_predictor.ingest.report.JobLogReport`).
Not here: PanDA's own job tables (db/) and what is done with the frames (core/replay/,
pipelines/).
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
from panda_predictor.ingest.nextflow import (
    NextflowReport,
    is_nextflow_header,
    read_nextflow_trace,
    trace_files,
)
from panda_predictor.ingest.report import JobLogReport, available_targets
from panda_predictor.ingest.swf import SwfReport, read_swf, trace_name

__all__ = [
    "ASSUMED_WAIT_S",
    "JOB_FRAME_COLUMNS",
    "HtcondorReport",
    "JobLogError",
    "JobLogReport",
    "NextflowReport",
    "SwfReport",
    "available_targets",
    "job_log_format",
    "job_logs_in",
    "passed_over",
    "read_htcondor_history",
    "read_job_log",
    "read_nextflow_trace",
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
    """Return ``"swf"``, ``"htcondor"`` or ``"nextflow"`` for a job log, by content.

    Suffixes lie (archives rename, sites pipe ``condor_history`` into any name), so
    the content decides: a JSON array or object is HTCondor history, a ``;``
    header or a line starting with a number is SWF, a header naming Nextflow trace
    fields is a Nextflow trace. A folder is a Nextflow history (its trace files).
    """
    path = Path(path)
    if path.is_dir():
        if trace_files(path):
            return "nextflow"
        raise JobLogError(
            "A job log folder must hold Nextflow trace files (*.txt, *.tsv, *.csv, "
            f"plain or gzip, with a trace header). Got none in {str(path)!r} instead."
        )
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
    if body and is_nextflow_header(body.splitlines()[0]):
        return "nextflow"
    found = f"text starting {body[:40]!r}" if body else "an empty file"
    raise JobLogError(
        "The job log must be SWF text or condor_history -json output (a JSON array "
        "or JSON lines) or a Nextflow trace (a header naming its fields), plain or "
        f"gzip. Got {str(path)!r} with {found} instead."
    )


#: Suffixes of SWF and HTCondor logs that ``--all`` picks up by name.
LOG_SUFFIXES = (".swf", ".swf.gz", ".json", ".json.gz", ".jsonl", ".jsonl.gz")


def job_logs_in(folder: str | Path) -> list[Path]:
    """Return the job logs of a folder, one history each, in name order.

    SWF and HTCondor logs by suffix; Nextflow traces by header: each trace file
    directly in ``folder`` is one history, and so is each sub-folder holding trace
    files (one pipeline's runs).
    """
    folder = Path(folder)
    out = []
    for path in sorted(folder.iterdir()):
        by_name = path.is_file() and path.name.endswith(LOG_SUFFIXES)
        if by_name or (path.is_dir() and trace_files(path)):
            out.append(path)
    return sorted([*out, *trace_files(folder)])


def passed_over(folder: str | Path, logs: list[Path]) -> list[Path]:
    """Return the files directly in ``folder`` that :func:`job_logs_in` did not take.

    ``--all`` names them, so a log whose name it does not know (``site.log``) is
    not skipped unseen: such a file can still be given with ``--log``, which tells
    the format by content. Hidden files are left out.
    """
    taken = set(logs)
    return [
        p
        for p in sorted(Path(folder).iterdir())
        if p.is_file() and p not in taken and not p.name.startswith(".")
    ]


def read_job_log(path: str | Path, **kw: Any) -> tuple[pd.DataFrame, JobLogReport]:
    """Read an SWF log, an HTCondor history or Nextflow traces into a job frame.

    :param path: the log, plain or gzip; the format is told by content
        (:func:`job_log_format`); a folder of Nextflow traces is one history.
    :param kw: passed to the format's reader (:func:`read_swf`,
        :func:`read_htcondor_history`, :func:`read_nextflow_trace`), e.g.
        ``assumed_wait_s``.
    """
    kind = job_log_format(path)
    if kind == "htcondor":
        return read_htcondor_history(path, **kw)
    if kind == "nextflow":
        return read_nextflow_trace(path, **kw)
    return read_swf(path, **kw)
