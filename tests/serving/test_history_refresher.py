"""The recent-history index of the HTTP service and the JEDI refiner: refreshed in
the background, failing open, counted under the hook's label."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import REGISTRY

from panda_predictor.serving.history_refresher import HistoryRefresher


def _fallbacks(reason: str, hook: str = "http") -> float:
    labels = {"hook": hook, "reason": f"history_{reason}"}
    return REGISTRY.get_sample_value("panda_predictor_fallbacks_total", labels) or 0.0


@pytest.mark.parametrize("hook", ["http", "jedi"])
def test_a_failed_read_keeps_the_last_index_and_is_counted(hook):
    answers = iter(["index-1", OSError("database down"), "index-2"])

    def loader():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    refresher = HistoryRefresher(loader, interval=60, hook=hook)
    assert refresher.index is None
    refresher.refresh()
    assert (refresher.index, refresher.error) == ("index-1", None)

    before = {h: _fallbacks("OSError", h) for h in ("http", "jedi")}
    refresher.refresh()
    assert refresher.index == "index-1"
    assert refresher.error == "OSError: database down"
    after = {h: _fallbacks("OSError", h) for h in ("http", "jedi")}
    assert after == {h: before[h] + (h == hook) for h in before}

    refresher.refresh()
    assert (refresher.index, refresher.error) == ("index-2", None)


def test_the_thread_reads_at_once_and_stops_when_asked():
    read = threading.Event()

    def loader():
        read.set()
        return "index"

    refresher = HistoryRefresher(loader, interval=3600, hook="http")
    assert not refresher.running
    refresher.start()
    refresher.start()  # a second start does not start a second thread
    try:
        assert read.wait(10)
    finally:
        refresher.stop()
    assert refresher.index == "index"
    assert not refresher.running


def fail_first_refresher_start(monkeypatch, hook: str) -> list[str]:
    """Make the first start of the ``hook`` refresher's thread raise as CPython does
    when no thread is left; return the names of the starts that failed."""
    original = threading.Thread.start
    failed: list[str] = []

    def start(thread: threading.Thread) -> None:
        if thread.name == f"history-refresher-{hook}" and not failed:
            failed.append(thread.name)
            raise RuntimeError("can't start new thread")
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    return failed


def test_a_thread_that_cannot_start_is_started_by_the_next_call(monkeypatch):
    read = threading.Event()

    def loader():
        read.set()
        return "index"

    failed = fail_first_refresher_start(monkeypatch, "http")
    refresher = HistoryRefresher(loader, interval=3600, hook="http")
    with pytest.raises(RuntimeError, match="can't start new thread"):
        refresher.start()
    assert failed == ["history-refresher-http"]
    assert not refresher.running
    refresher.start()  # not left half-started: this one starts the thread
    try:
        assert refresher.running
        assert read.wait(10)
    finally:
        refresher.stop()
    assert refresher.index == "index"
    assert not refresher.running
