"""What a job-log reader saw, so nothing it set aside or assumed goes unsaid.

:class:`JobLogReport` holds what every reader reports (jobs, values set aside, the
assumed wait, the time span, the targets); each reader's subclass adds what its
format has (SWF header lines, HTCondor records) and says it first in
:meth:`JobLogReport.lines`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from panda_predictor.ingest.frame import (
    ASSUMED_WAIT_S,
    MIN_RECORDED,
    TRACE_TARGETS,
    time_span,
)


def _duration(seconds: float) -> str:
    """Return a duration in the largest whole unit that fits (``1 h``, ``90 s``)."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


@dataclass
class JobLogReport:
    """What a reader saw: jobs, values set aside, what it assumed, the targets."""

    path: str = ""
    n_jobs: int = 0
    n_malformed: int = 0
    n_without_submit_time: int = 0
    #: Jobs listed a second time (a log concatenated with an overlapping extract
    #: of itself): skipped, so neither training nor the replay counts them twice.
    n_duplicate: int = 0
    negative: Counter[str] = field(default_factory=Counter)
    absurd: Counter[str] = field(default_factory=Counter)
    #: Jobs whose finish rests on :attr:`assumed_wait_s` (their wait not recorded).
    n_wait_assumed: int = 0
    assumed_wait_s: float = ASSUMED_WAIT_S
    #: Whether submit times are anchored to a real date (else they count from 1970).
    start_known: bool = True
    first_submit: pd.Timestamp | None = None
    last_submit: pd.Timestamp | None = None
    available_targets: dict[str, int] = field(default_factory=dict)

    def source_lines(self) -> list[str]:
        """Return the format's own lines (what was read and skipped); override."""
        return [f"file: {self.path}", f"jobs: {self.n_jobs}"]

    def lines(self) -> list[str]:
        """Return a short human summary, one fact per line."""
        out = self.source_lines()
        for kind, counts in (("negative", self.negative), ("absurd", self.absurd)):
            if counts:
                listed = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
                out.append(f"{kind} values set to missing: {listed}")
        if self.n_wait_assumed:
            out.append(self.wait_line())
        out.append(self.span_line())
        for name in TRACE_TARGETS:
            n = self.available_targets.get(name, 0)
            if n >= MIN_RECORDED:
                out.append(f"target {name}: {n} jobs")
            elif n == 0:
                out.append(f"target {name}: not available")
            else:
                out.append(
                    f"target {name}: not available (recorded for {n} jobs, "
                    f"fewer than {MIN_RECORDED})"
                )
        return out

    def wait_line(self) -> str:
        """Return the wait assumption in plain words."""
        wait = self.assumed_wait_s
        return (
            f"wait time not recorded for {self.n_wait_assumed:,} jobs with a run "
            f"time: assumed {wait:g} s, so a job's label counts as known only "
            f"{_duration(wait)} after its run would end if it had started at once"
        )

    def span_line(self) -> str:
        """Return the time the jobs' submissions span, and whether dates are real."""
        if self.first_submit is None or self.last_submit is None:
            return "span: no job with a submit time"
        days = (self.last_submit - self.first_submit).total_seconds() / 86400.0
        first = self.first_submit.strftime("%Y-%m-%d %H:%M")
        last = self.last_submit.strftime("%Y-%m-%d %H:%M")
        months = pd.period_range(self.first_submit, self.last_submit, freq="M")
        n_months = len(months)
        plural = "month" if n_months == 1 else "months"
        text = f"span: {first} .. {last} UTC ({days:.1f} days, {n_months} {plural})"
        if not self.start_known:
            text += "; no start date recorded, so dates count from 1970-01-01"
        return text

    def summarise(self, frame: pd.DataFrame) -> None:
        """Fill the counts every reader shares from the finished job frame."""
        self.n_jobs = len(frame)
        self.n_wait_assumed = int(frame["wait_assumed"].sum())
        self.first_submit, self.last_submit = time_span(frame["submit_time"])
        self.available_targets = {
            name: int(frame[col].notna().sum()) if col in frame.columns else 0
            for name, (col, _) in TRACE_TARGETS.items()
        }


def available_targets(report: JobLogReport) -> list[str]:
    """Return the targets the file records for at least :data:`MIN_RECORDED` jobs."""
    return [t for t, n in report.available_targets.items() if n >= MIN_RECORDED]
