"""Keep a recent-history index fresh in the background, for the history features.

``POST /v1/predictions`` never queries the database on the request path. When
enabled, a daemon thread reads the recent labelled history
(:func:`panda_predictor.serving.recent.read_recent_history`) every
``interval`` seconds and swaps the index in; requests use whatever index is current.
Until the first read succeeds, or if the database is unreachable, history features
are NaN (the models were trained to cope: a new kind of task has no history either).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from panda_predictor.metrics import FALLBACKS

log = logging.getLogger(__name__)


class HistoryRefresher:
    """Refresh a history index every ``interval`` seconds in a daemon thread.

    Parameters
    ----------
    loader:
        Returns a fresh
        :class:`~panda_predictor.core.features.history.RecentHistoryIndex`.
    interval:
        Seconds between refreshes.
    """

    def __init__(self, loader: Callable[[], Any], interval: float) -> None:
        self._loader = loader
        self.interval = interval
        self.index: Any = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> None:
        """Read the history once; on failure keep the previous index and log why."""
        try:
            self.index = self._loader()
            self.error = None
        except Exception as exc:  # noqa: BLE001  history is optional: fail open
            self.error = f"{type(exc).__name__}: {exc}"
            FALLBACKS.labels("http", "history_" + type(exc).__name__).inc()
            log.warning(
                "recent history not refreshed (features stay as they were): %s",
                self.error,
            )

    def start(self) -> None:
        """Start the background thread (first refresh right away)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="history-refresher", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self.interval)

    def stop(self) -> None:
        """Stop the thread and wait for it to finish its current read."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
