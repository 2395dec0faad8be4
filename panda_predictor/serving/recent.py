"""Recent labelled history for serving: what similar tasks needed, as known now.

The history features (last value, mean of the last two, count, per transformation +
release, processing type + framework and user) come from the scouts and jobs that
finished before the prediction. The hook reads the last ``days`` of history once per
pass and indexes it for O(1) lookups.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
from sqlalchemy.engine import Connection, Engine

from panda_predictor.core.features import TASK_COLUMNS
from panda_predictor.core.history import (
    HISTORY_GROUPS,
    RecentHistoryIndex,
    required_columns,
)
from panda_predictor.core.labels import join_labels
from panda_predictor.core.targets import TARGET_NAMES
from panda_predictor.db.reader import iter_history
from panda_predictor.settings import Settings

DEFAULT_DAYS = 180


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
    keep = list(dict.fromkeys([*TASK_COLUMNS, *required_columns(HISTORY_GROUPS)]))
    parts = [
        join_labels(tasks, jobs, keep)
        for tasks, jobs in iter_history(
            bind, settings, chunk_size=chunk_size, since=now - timedelta(days=days)
        )
    ]
    if not parts:
        return pd.DataFrame(columns=[*keep, *TARGET_NAMES, "labels_known_at"]).astype(
            {"labels_known_at": "datetime64[ns]", "creationdate": "datetime64[ns]"}
        )
    frame = pd.concat(parts, ignore_index=True)
    known = pd.to_datetime(frame["labels_known_at"]) < pd.Timestamp(now)
    frame = frame[known].sort_values(["creationdate", "jeditaskid"], kind="stable")
    return frame.reset_index(drop=True)


def read_recent_history(
    bind: Engine | Connection,
    settings: Settings,
    now: datetime | None = None,
    days: int = DEFAULT_DAYS,
    chunk_size: int = 5000,
) -> RecentHistoryIndex:
    """Return the labelled history of tasks created in the last ``days``, indexed."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    keep = ["jeditaskid", *required_columns(HISTORY_GROUPS)]
    parts = [
        join_labels(tasks, jobs, keep)
        for tasks, jobs in iter_history(
            bind, settings, chunk_size=chunk_size, since=now - timedelta(days=days)
        )
    ]
    if parts:
        frame = pd.concat(parts, ignore_index=True)
    else:  # nothing recent: an empty history, every task "seen 0 times"
        frame = pd.DataFrame(columns=[*keep, *TARGET_NAMES, "labels_known_at"]).astype(
            {"labels_known_at": "datetime64[ns]"}
        )
    return RecentHistoryIndex.from_frame(frame, as_of=now)
