"""The service under its real server on loopback: a SIGTERM drains, then cleans up."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import threading
import time

import pytest

from panda_predictor.http_api import create_app
from panda_predictor.http_api.server import GracefulServer
from panda_predictor.settings import load_settings


def _no_model():
    raise RuntimeError("no model in this test")


@pytest.fixture
def slow_server(tmp_path):
    """Yield a GracefulServer (2 threads) whose app has a 0.5 s route, running."""
    app = create_app(load_settings(home=tmp_path), predictor_loader=_no_model)

    def slow():
        time.sleep(0.5)
        return "done"

    app.add_url_rule("/slow", "slow", slow)
    server = GracefulServer(app, "127.0.0.1", 0, threads=2, drain_seconds=10)
    previous = signal.getsignal(signal.SIGTERM)
    server.install_signal_handler()
    loop = threading.Thread(target=server.run, daemon=True)
    loop.start()
    try:
        yield server, loop
    finally:
        signal.signal(signal.SIGTERM, previous)
        if loop.is_alive():
            server.begin_drain()
            loop.join(15)


def _get(conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes, str]:
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read(), response.getheader("Connection") or ""


def test_sigterm_answers_every_received_request_then_stops_and_cleans_up(
    slow_server,
):
    server, loop = slow_server
    port = server.port
    probe = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    assert _get(probe, "/healthz")[0] == 200  # a keep-alive connection, open
    results: list[tuple[int, bytes, str]] = []

    def call() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        results.append(_get(conn, "/slow"))

    callers = [threading.Thread(target=call) for _ in range(3)]  # 2 run, 1 waits
    for caller in callers:
        caller.start()
    deadline = time.monotonic() + 10
    while server._busy() < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server._busy() == 3  # all three received before the signal

    os.kill(os.getpid(), signal.SIGTERM)  # handled in this (main) thread
    time.sleep(0.05)
    assert server.state.draining.is_set()
    status, body, connection = _get(probe, "/readyz")  # the reused connection
    assert status == 503 and b'"status":"draining"' in body.replace(b" ", b"")
    assert connection == "close"

    for caller in callers:
        caller.join(20)
    assert results == [(200, b"done", "close")] * 3  # none cut
    loop.join(20)
    assert not loop.is_alive()
    assert server.drained.is_set() and server.cut_requests == 0
    assert server.state.closed  # the clean-up ran
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_the_server_feeds_its_queue_length_to_the_load_shedder(slow_server):
    server, _ = slow_server
    shedder = server.app.wsgi_app
    assert shedder.waiting() == 0
    server.server.task_dispatcher.queue.extend([object()] * 3)
    try:
        assert shedder.waiting() == 3
    finally:
        server.server.task_dispatcher.queue.clear()
