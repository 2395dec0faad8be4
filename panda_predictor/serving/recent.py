"""Recent labelled history for serving: what similar tasks needed, as known now.

The history features (last value, mean of the last two, count, per transformation +
release, processing type + framework and user) come from the scouts and jobs that
finished before the prediction. The hook keeps the last ``days`` of history between
passes (:class:`IncrementalHistory`) and reads only the tasks that changed since its
previous pass; the service and the benchmark read it whole (:func:`read_history_frame`),
and the service and the JEDI refiner index it as of now
(:func:`read_serving_history`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pandas as pd
from sqlalchemy.engine import Connection, Engine

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.features.history import (
    HISTORY_GROUPS,
    required_columns,
)
from panda_predictor.core.features.pipeline import TASK_COLUMNS
from panda_predictor.core.labels import join_labels
from panda_predictor.db.reader import (
    find_changed_tasks,
    iter_history,
    iter_task_history,
)
from panda_predictor.serving.combination import ServingHistory
from panda_predictor.settings import Settings

if TYPE_CHECKING:
    from panda_predictor.serving.bundle import Bundle

DEFAULT_DAYS = 180
#: A change stamped up to this long before the previous read is read again: jobs
#: reach JOBSARCHIVED4 some minutes after their ENDTIME, and a transaction may
#: commit after the stamp it wrote.
DEFAULT_OVERLAP = timedelta(minutes=30)
#: The incremental history is read whole again this often (a safety net for a
#: change that carried no new stamp).
DEFAULT_FULL_READ_EVERY = timedelta(hours=24)


def _history_columns() -> list[str]:
    return list(dict.fromkeys([*TASK_COLUMNS, *required_columns(HISTORY_GROUPS)]))


def _empty_history(keep: list[str]) -> pd.DataFrame:
    return pd.DataFrame(columns=[*keep, *TARGET_NAMES, "labels_known_at"]).astype(
        {"labels_known_at": "datetime64[ns]", "creationdate": "datetime64[ns]"}
    )


def _known_before(frame: pd.DataFrame, now: datetime) -> pd.DataFrame:
    """Keep the rows whose labels were known before ``now``, in creation order."""
    known = pd.to_datetime(frame["labels_known_at"]) < pd.Timestamp(now)
    frame = frame[known].sort_values(["creationdate", "jeditaskid"], kind="stable")
    return frame.reset_index(drop=True)


def read_history_frame(
    bind: Engine | Connection,
    settings: Settings,
    now: datetime | None = None,
    days: int = DEFAULT_DAYS,
    chunk_size: int = 5000,
) -> pd.DataFrame:
    """Return the labelled history of the last ``days`` with the task columns.

    What the hook predicts with: the history features (as of each task's creation)
    and the model's track record for the expert combination both come from it.
    Only labels known before ``now`` are kept.
    """
    now = now or datetime.now(UTC).replace(tzinfo=None)
    keep = _history_columns()
    parts = [
        join_labels(tasks, jobs, keep)
        for tasks, jobs in iter_history(
            bind, settings, chunk_size=chunk_size, since=now - timedelta(days=days)
        )
    ]
    if not parts:
        return _empty_history(keep)
    return _known_before(pd.concat(parts, ignore_index=True), now)


def read_serving_history(
    bind: Engine | Connection,
    settings: Settings,
    now: datetime | None = None,
    days: int = DEFAULT_DAYS,
    bundle: Bundle | None = None,
) -> ServingHistory:
    """Return the recent labelled history indexed as of ``now`` (features + experts).

    What the HTTP service and the JEDI refiner predict with, read in the background
    (:class:`~panda_predictor.serving.history_refresher.HistoryRefresher`): for a task
    created at ``now`` it gives the answer the frame gives the hook and the benchmark.
    With a ``bundle`` the index and that bundle's expert records are built here too
    (in the reader's thread), not by the first prediction that needs them.

    Parameters
    ----------
    bind:
        Where to read.
    settings:
        Settings naming the PanDA schema.
    now:
        The time the history is known at; default: the clock (UTC).
    days:
        The history window: tasks created in the last ``days``.
    bundle:
        The bundle served now (None: nothing is built ahead).
    """
    now = now or datetime.now(UTC).replace(tzinfo=None)
    history = ServingHistory(read_history_frame(bind, settings, now, days), now)
    if bundle is not None:
        history.index  # noqa: B018  built now, off the prediction path
        if bundle.combination is not None:
            history.snapshots(bundle)
    return history


class IncrementalHistory:
    """The hook's labelled history, kept between passes and refreshed incrementally.

    Reading 180 days of tasks and jobs costs seconds and hundreds of MB; a pass needs
    only what changed since the previous one. The first :meth:`frame` reads the
    window whole; later ones re-read only the tasks :func:`find_changed_tasks`
    names (JEDI touched them or one of their jobs finished since the previous read,
    minus ``overlap``), drop the tasks that left the window and return exactly what
    :func:`read_history_frame` would return at the same time. Every
    ``full_read_every`` the window is read whole again.

    Parameters
    ----------
    bind:
        Where to read.
    settings:
        Settings naming the PanDA schema.
    days:
        The history window: tasks created in the last ``days``.
    overlap:
        How far before the previous read changes are looked for again.
    full_read_every:
        How often the window is read whole again.
    """

    def __init__(
        self,
        bind: Engine | Connection,
        settings: Settings,
        days: int = DEFAULT_DAYS,
        overlap: timedelta = DEFAULT_OVERLAP,
        full_read_every: timedelta = DEFAULT_FULL_READ_EVERY,
        chunk_size: int = 5000,
    ) -> None:
        self.bind = bind
        self.settings = settings
        self.days = days
        self.overlap = overlap
        self.full_read_every = full_read_every
        self.chunk_size = chunk_size
        self._keep = _history_columns()
        self._rows: pd.DataFrame | None = None
        self._read_at: datetime | None = None
        self._full_read_at: datetime | None = None
        #: Tasks re-read by the last refresh (None: it was a full read).
        self.last_changed: list[int] | None = None

    def _labelled(self, chunks) -> pd.DataFrame:
        parts = [join_labels(tasks, jobs, self._keep) for tasks, jobs in chunks]
        if not parts:
            return _empty_history(self._keep)
        return pd.concat(parts, ignore_index=True)

    def frame(self, now: datetime | None = None) -> pd.DataFrame:
        """Return the labelled history known at ``now`` (default: the clock)."""
        now = now or datetime.now(UTC).replace(tzinfo=None)
        start = now - timedelta(days=self.days)
        if (
            self._rows is None
            or self._read_at is None
            or self._full_read_at is None
            or now < self._read_at
            or now - self._full_read_at >= self.full_read_every
        ):
            self._rows = self._labelled(
                iter_history(
                    self.bind, self.settings, chunk_size=self.chunk_size, since=start
                )
            )
            self._full_read_at = now
            self.last_changed = None
        else:
            changed = find_changed_tasks(
                self.bind, self.settings, self._read_at - self.overlap, start
            )
            self.last_changed = changed
            if changed:
                fresh = self._labelled(
                    iter_task_history(
                        self.bind, self.settings, changed, self.chunk_size
                    )
                )
                kept = self._rows[~self._rows["jeditaskid"].isin(changed)]
                parts = [part for part in (kept, fresh) if len(part)]
                self._rows = pd.concat(parts, ignore_index=True) if parts else kept
        self._read_at = now
        in_window = pd.to_datetime(self._rows["creationdate"]) >= pd.Timestamp(start)
        self._rows = self._rows[in_window].reset_index(drop=True)
        return _known_before(self._rows, now)
