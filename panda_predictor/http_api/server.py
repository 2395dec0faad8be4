"""Run the service under waitress with a bounded queue and a graceful SIGTERM.

``waitress.serve`` alone has two faults an operator meets: it queues every request
it cannot serve yet (no bound, so overload turns into seconds of latency for all),
and SIGTERM kills it mid-request (clients see an empty reply) without running the
service's clean-up. :class:`GracefulServer` wraps a waitress server and

* gives the app's :class:`~panda_predictor.http_api.admission.LoadShedder` the
  length of waitress's task queue, so excess requests get a quick 503;
* on SIGTERM drains: ``/readyz`` answers "draining", the listening socket closes (new
  connections are refused, so a client or proxy tries another replica at once),
  every request already received is answered, with ``Connection: close`` so no
  keep-alive connection is reused, and only then are the connections closed, or
  after ``drain_seconds`` at the latest; then the service's clean-up runs.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

import waitress
from flask import Flask
from waitress.channel import HTTPChannel
from waitress.task import WSGITask

from panda_predictor.http_api.state import ServiceState

log = logging.getLogger(__name__)


class _DrainingTask(WSGITask):
    """A waitress task that closes its connection after answering while draining."""

    def build_response_header(self) -> bytes:
        if self.channel.server.draining.is_set():
            self.set_close_on_finish()  # adds "Connection: close" to the answer
        return super().build_response_header()


class _DrainingChannel(HTTPChannel):
    task_class = _DrainingTask


class GracefulServer:
    """A waitress server on ``host:port`` that sheds load and drains on SIGTERM.

    Parameters
    ----------
    app:
        The service app from :func:`~panda_predictor.http_api.create_app`.
    host, port:
        Where to listen (port 0: any free port, see :attr:`port`).
    threads:
        Worker threads (requests served at once).
    drain_seconds:
        Longest time a drain waits for received requests to finish.
    """

    def __init__(
        self, app: Flask, host: str, port: int, threads: int, drain_seconds: float
    ) -> None:
        self.app = app
        self.state: ServiceState = app.extensions["panda_predictor"]
        self.drain_seconds = drain_seconds
        self.server: Any = waitress.create_server(
            app,
            host=host,
            port=port,
            threads=threads,
            ident="panda-predictor",
            clear_untrusted_proxy_headers=True,
        )
        self.server.channel_class = _DrainingChannel
        self.server.draining = self.state.draining
        dispatcher = self.server.task_dispatcher
        app.wsgi_app.waiting = lambda: len(dispatcher.queue)  # type: ignore[attr-defined]
        self.drained = threading.Event()
        self.cut_requests = 0
        # waitress warns on every task that finds no idle thread; under load that is
        # a line per request. The shed counter and the latency histogram say it.
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)

    @property
    def port(self) -> int:
        """Return the TCP port the server listens on."""
        return int(self.server.effective_port)

    def install_signal_handler(self) -> None:
        """Drain on SIGTERM (call from the main thread)."""
        signal.signal(signal.SIGTERM, lambda _signum, _frame: self.begin_drain())

    def run(self) -> None:
        """Serve until a drain ends (or Ctrl-C), then run the service's clean-up."""
        try:
            self.server.run()
        finally:
            self.state.close()
            log.info("HTTP service stopped; clean-up done")

    def begin_drain(self) -> None:
        """Stop taking new connections and finish the requests received so far."""
        if self.state.draining.is_set():
            return
        self.state.draining.set()
        log.warning(
            "SIGTERM: draining (at most %.0f s); new connections are refused",
            self.drain_seconds,
        )
        self.server.trigger.pull_trigger(self._stop_listening)
        threading.Thread(target=self._drain, name="http-drain", daemon=True).start()

    def _stop_listening(self) -> None:
        """Close the listening socket (runs in the server's loop thread)."""
        import waitress.wasyncore as wasyncore

        wasyncore.dispatcher.close(self.server)

    def _channels(self) -> list[HTTPChannel]:
        return [
            c for c in list(self.server._map.values()) if isinstance(c, HTTPChannel)
        ]

    def _busy(self) -> int:
        """Return how many requests are received but not yet fully answered.

        A request waiting in the queue is also in its channel's ``requests``; an
        answered one stays until its output is flushed.
        """
        return sum(
            len(c.requests) or (1 if c.total_outbufs_len else 0)
            for c in self._channels()
        )

    def _drain(self) -> None:
        deadline = time.monotonic() + self.drain_seconds
        quiet_since = None
        while time.monotonic() < deadline:
            if self._busy():
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > 0.2:  # idle, and stays so
                break
            time.sleep(0.02)
        else:
            self.cut_requests = self._busy()
            log.error(
                "drain took longer than %.0f s: %d requests are cut",
                self.drain_seconds,
                self.cut_requests,
            )
        self.server.trigger.pull_trigger(self._close_all)

    def _close_all(self) -> None:
        """Close every connection and the loop's trigger, so the loop ends."""
        for channel in self._channels():
            channel.handle_close()
        self.server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)
        self.server.trigger.close()
        self.drained.set()
