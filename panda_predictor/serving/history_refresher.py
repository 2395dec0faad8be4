"""Keep a recent-history index fresh in the background, for the history features.

The HTTP service (``POST /v1/predictions``) and the JEDI refiner's in-process client
never query the database on the request path. When enabled, a daemon thread reads
the recent labelled history
(:func:`panda_predictor.serving.recent.read_serving_history`) every ``interval``
seconds and swaps the index in; predictions use whatever index is current. Until
the first read succeeds, or if the database is unreachable, history features are
NaN (the models were trained to cope: a new kind of task has no history either).
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
        Returns a fresh index, e.g. a
        :class:`~panda_predictor.serving.combination.ServingHistory`.
    interval:
        Seconds between refreshes.
    hook:
        The ``hook`` label a failed read is counted under in
        ``panda_predictor_fallbacks_total`` (``"http"``, ``"jedi"``), with the
        reason ``history_<exception class>``.
    """

    def __init__(self, loader: Callable[[], Any], interval: float, hook: str) -> None:
        self._loader = loader
        self.interval = interval
        self.hook = hook
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
            FALLBACKS.labels(self.hook, "history_" + type(exc).__name__).inc()
            log.warning(
                "recent history not refreshed for hook=%s (features stay as they "
                "were): %s",
                self.hook,
                self.error,
            )

    def start(self) -> None:
        """Start the background thread (first refresh right away).

        A second call while the thread runs starts no other. A thread that cannot
        start (``RuntimeError: can't start new thread``) raises and leaves the
        refresher as it was, so a later call tries again.
        """
        if self._thread is None:
            thread = threading.Thread(
                target=self._run, name=f"history-refresher-{self.hook}", daemon=True
            )
            thread.start()
            # Kept only once started: an unstarted thread would turn every later
            # start() into a no-op and make stop() fail on join().
            self._thread = thread

    @property
    def running(self) -> bool:
        """Return whether the background thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self.interval)

    def stop(self) -> None:
        """Stop the thread and wait for it to finish its current read."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
