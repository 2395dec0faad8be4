"""The service's recent-history index: refreshed in the background, failing open."""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY

from panda_predictor.http_api.history import HistoryRefresher


def _fallbacks(reason: str) -> float:
    labels = {"hook": "http", "reason": f"history_{reason}"}
    return REGISTRY.get_sample_value("panda_predictor_fallbacks_total", labels) or 0.0


def test_a_failed_read_keeps_the_last_index_and_is_counted():
    answers = iter(["index-1", OSError("database down"), "index-2"])

    def loader():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    refresher = HistoryRefresher(loader, interval=60)
    assert refresher.index is None
    refresher.refresh()
    assert (refresher.index, refresher.error) == ("index-1", None)

    before = _fallbacks("OSError")
    refresher.refresh()
    assert refresher.index == "index-1"
    assert refresher.error == "OSError: database down"
    assert _fallbacks("OSError") == before + 1

    refresher.refresh()
    assert (refresher.index, refresher.error) == ("index-2", None)


def test_the_thread_reads_at_once_and_stops_when_asked():
    read = threading.Event()

    def loader():
        read.set()
        return "index"

    refresher = HistoryRefresher(loader, interval=3600)
    refresher.start()
    refresher.start()  # a second start does not start a second thread
    try:
        assert read.wait(10)
    finally:
        refresher.stop()
    assert refresher.index == "index"
    assert not refresher._thread.is_alive()
