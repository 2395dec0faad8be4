"""The job frame every reader produces: its columns, targets and the wait assumption.

Readers of different logs (SWF, HTCondor history) map onto one frame so the
benchmark and the replay never learn which log a job came from. One job is one row,
sorted by submit time; ``NaN`` means "not recorded", never zero.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from panda_predictor.ingest.files import JobLogError

#: The job frame's columns, in order (readers may add their own after these).
JOB_FRAME_COLUMNS: tuple[str, ...] = (
    "job_id",
    "submit_s",
    "submit_time",
    "user",
    "group",
    "executable",
    "queue",
    "partition",
    "req_procs",
    "req_time_s",
    "req_memory_mb",
    "wait_s",
    "finish_s",
    "procs",
    "status",
    "run_s",
    "cpu_s",
    "used_memory_mb",
    "used_memory_total_mb",
    "wait_assumed",
)
#: Categorical submission-time features (kept as strings).
CATEGORICAL_FEATURES: tuple[str, ...] = (
    "user",
    "group",
    "executable",
    "queue",
    "partition",
)
#: Numeric submission-time features.
NUMERIC_FEATURES: tuple[str, ...] = ("req_procs", "req_time_s", "req_memory_mb")
#: Our target name -> (job-frame column, unit in trace data).
TRACE_TARGETS: dict[str, tuple[str, str]] = {
    "walltime": ("run_s", "s"),
    "cputime": ("cpu_s", "s per processor"),
    "ramcount": ("used_memory_mb", "MB per processor"),
    "iointensity": ("io_kbps", "kBPerS"),
}
#: A target needs at least this many recorded jobs to count as available.
MIN_RECORDED = 50
#: Where a log does not record how long a job waited, it is assumed to have waited
#: this long (s) before it started. Without some wait no job ever finishes, so no
#: job could become history; one hour errs late: a label then counts as known an
#: hour after the run would have ended had the job started at once, which delays
#: history instead of leaking the future into it.
ASSUMED_WAIT_S = 3600.0


def check_assumed_wait(assumed_wait_s: object) -> float:
    """Return ``assumed_wait_s`` as a float, or raise if it is not a wait time."""
    ok = (
        isinstance(assumed_wait_s, int | float)
        and not isinstance(assumed_wait_s, bool)
        and math.isfinite(assumed_wait_s)
        and assumed_wait_s >= 0
    )
    if not ok:
        raise JobLogError(
            "The 'assumed_wait_s' field must be a finite number of seconds >= 0. "
            f"Got {assumed_wait_s!r} instead."
        )
    return float(assumed_wait_s)  # type: ignore[arg-type]


def finish_times(
    submit: np.ndarray,
    wait: np.ndarray,
    run: np.ndarray,
    not_recorded: np.ndarray,
    assumed_wait_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Return when each job finished, and where that rests on the assumed wait.

    :param submit: submit times (s).
    :param wait: recorded waits (s), ``NaN`` where unknown.
    :param run: run times (s), ``NaN`` where unknown: the finish then stays unknown.
    :param not_recorded: the log did not record the wait (as opposed to recording
        a value the reader set aside as impossible: that finish stays unknown).
    :param assumed_wait_s: the wait assumed where it is not recorded.
    """
    assumed = not_recorded & np.isnan(wait) & ~np.isnan(run)
    used_wait = np.where(assumed, assumed_wait_s, wait)
    return submit + used_wait + run, assumed


def time_span(
    submit_time: pd.Series,
) -> tuple[pd.Timestamp | None, pd.Timestamp | None]:
    """Return the first and last submit time (``None`` for an empty log)."""
    if submit_time.empty or submit_time.isna().all():
        return None, None
    return submit_time.min(), submit_time.max()


def string_categories(values: pd.Series) -> pd.Categorical:
    """Return values as string categories, missing (``None``/``NaN``/"") staying so."""
    text = values.astype(object).where(values.notna(), None)
    text = text.map(lambda v: None if v is None or v == "" else str(v))
    return pd.Categorical(text)
