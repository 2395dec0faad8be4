"""Consume a STOMP destination in batches and acknowledge what a handler accepted.

The consumer subscribes with ``client`` (cumulative) acknowledgement and a prefetch
limit, hands each batch of received messages to a handler, and acknowledges the
batch with one frame only after the handler returned; when the handler raises, or
the connection is lost, nothing of the batch is acknowledged and the broker
delivers it again (at least once). It stands in for JEDI's message processor
where JEDI is not running (tests, benchmarks, a standalone adjuster) and keeps
the same contract: return = done, raise = deliver again.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import stomp
from stomp.exception import StompException

from panda_predictor.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Received:
    """One received message: the broker's ids and the body."""

    message_id: str
    ack_id: str
    body: str
    redelivered: bool


class _Inbox(stomp.ConnectionListener):
    def __init__(self, inbox: queue.Queue) -> None:
        self.inbox = inbox
        self.lost = threading.Event()

    def on_message(self, frame: Any) -> None:
        headers = frame.headers
        self.inbox.put(
            Received(
                headers.get("message-id", ""),
                headers.get("ack", headers.get("message-id", "")),
                frame.body,
                headers.get("redelivered") == "true",
            )
        )

    def on_disconnected(self) -> None:
        self.lost.set()


class StompConsumer:
    """Receive from ``settings.broker_destination`` and feed ``handler`` in batches.

    Parameters
    ----------
    settings:
        Broker host, port, login and destination.
    handler:
        Called with each batch; returns normally when the batch is done.
    batch_size:
        Most messages per batch (and the prefetch limit is twice it).
    batch_wait_seconds:
        How long a batch waits to fill before it is handled anyway.
    """

    def __init__(
        self,
        settings: Settings,
        handler: Callable[[Sequence[Received]], Any],
        batch_size: int = 200,
        batch_wait_seconds: float = 0.05,
    ) -> None:
        self.settings = settings
        self.handler = handler
        self.batch_size = batch_size
        self.batch_wait_seconds = batch_wait_seconds
        self._stop = threading.Event()
        self._conn: Any = None
        self._inbox: queue.Queue = queue.Queue()
        self._listener: _Inbox | None = None
        self.reconnects = 0
        self.handled = 0

    def _connect(self) -> None:
        s = self.settings
        self._inbox = queue.Queue()  # unacknowledged copies come again anyway
        conn = stomp.Connection12(
            host_and_ports=[(s.broker_host, s.broker_port)],
            reconnect_attempts_max=1,
            vhost=s.broker_vhost,
            heartbeats=(0, 0),
        )
        self._listener = _Inbox(self._inbox)
        conn.set_listener("inbox", self._listener)
        conn.connect(username=s.broker_username, passcode=s.broker_passcode, wait=True)
        conn.subscribe(
            s.broker_destination,
            id=f"pp-{uuid.uuid4().hex[:8]}",
            ack="client",
            headers={"prefetch-count": str(2 * self.batch_size)},
        )
        self._conn = conn

    def _next_batch(self) -> list[Received]:
        batch: list[Received] = []
        deadline = time.monotonic() + self.batch_wait_seconds
        while len(batch) < self.batch_size:
            left = deadline - time.monotonic()
            try:
                batch.append(self._inbox.get(timeout=max(left, 0.001)))
            except queue.Empty:
                if batch or left <= 0:
                    break
        return batch

    def run(self, until: Callable[[], bool] | None = None) -> None:
        """Consume until :meth:`stop` (or ``until()`` is true); reconnect when lost."""
        attempt = 0
        while not self._stop.is_set() and not (until and until()):
            try:
                lost = self._listener is not None and self._listener.lost.is_set()
                if self._conn is None or lost:
                    if lost:
                        self.reconnects += 1
                        log.warning("consumer: broker connection lost, reconnecting")
                    self._close()
                    self._connect()
                    attempt = 0
                batch = self._next_batch()
                if not batch:
                    continue
                try:
                    self.handler(batch)
                except Exception:  # noqa: BLE001  not acknowledged: delivered again
                    log.exception(
                        "consumer: handler failed, %d messages left unacknowledged",
                        len(batch),
                    )
                    self._close()
                    attempt += 1
                    time.sleep(min(0.2 * 2 ** min(attempt, 5), 5.0))
                    continue
                # 'client' acknowledgement is cumulative: the batch's last message
                # acknowledges it all, in one frame.
                self._conn.ack(batch[-1].ack_id)
                self.handled += len(batch)
            except (StompException, OSError) as exc:
                attempt += 1
                self.reconnects += 1
                log.warning("consumer: broker lost (%s), reconnecting", exc)
                self._close()
                time.sleep(min(0.2 * 2 ** min(attempt, 5), 5.0))
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            try:
                if self._conn.is_connected():
                    self._conn.disconnect()
            except (StompException, OSError) as exc:
                log.debug("closing the consumer connection: %s", exc)
            self._conn = None

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current batch."""
        self._stop.set()
