"""Send messages to a STOMP destination, at least once, each confirmed by a receipt.

Every SEND asks for a receipt; a message counts as published only when its receipt
came back (RabbitMQ and ActiveMQ send it once the broker holds the persistent
message). Messages whose receipt does not come (lost connection, broker restart,
timeout) are sent again on a new connection, with the same body and idempotency key,
until ``retry_seconds`` have passed; then :class:`BrokerUnavailable` is raised,
carrying the messages that were confirmed before. A copy may so reach the broker
twice; the consumer drops the second one by its idempotency key.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import stomp
from stomp.exception import StompException

from panda_predictor.settings import Settings

log = logging.getLogger(__name__)


class BrokerUnavailable(RuntimeError):
    """The broker did not confirm every message in time; ``done`` holds those it did."""

    def __init__(self, message: str, done: dict[str, str]) -> None:
        super().__init__(message)
        self.done = done


@dataclass(frozen=True)
class OutgoingMessage:
    """One message body to send, with its idempotency key and task id."""

    key: str
    task_id: int
    body: str


class _Receipts(stomp.ConnectionListener):
    """Collect receipt ids and notice a lost connection or an ERROR frame."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.received: set[str] = set()
        self.lost = False
        self.error: str | None = None

    def on_receipt(self, frame: Any) -> None:
        with self.condition:
            self.received.add(frame.headers.get("receipt-id", ""))
            self.condition.notify_all()

    def on_error(self, frame: Any) -> None:
        with self.condition:
            self.error = (
                f"{frame.headers.get('message', '')} {frame.body or ''}".strip()
            )
            self.condition.notify_all()

    def on_disconnected(self) -> None:
        with self.condition:
            self.lost = True
            self.condition.notify_all()


class StompPublisher:
    """Publish message batches to one STOMP destination; see the module docstring.

    Parameters
    ----------
    settings:
        ``broker_host``, ``broker_port``, ``broker_destination``, login, timeouts.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.destination = settings.broker_destination
        self._conn: Any = None
        self._listener = _Receipts()
        self.reconnects = 0

    def _connect(self) -> Any:
        if (
            self._conn is not None
            and self._conn.is_connected()
            and not self._listener.lost
        ):
            return self._conn
        self.close()
        s = self.settings
        conn = stomp.Connection12(
            host_and_ports=[(s.broker_host, s.broker_port)],
            reconnect_attempts_max=1,
            vhost=s.broker_vhost,
            heartbeats=(0, 0),
        )
        self._listener = _Receipts()
        conn.set_listener("receipts", self._listener)
        conn.connect(username=s.broker_username, passcode=s.broker_passcode, wait=True)
        self._conn = conn
        return conn

    def close(self) -> None:
        """Close the connection (if any); the next publish opens a new one."""
        if self._conn is not None:
            try:
                if self._conn.is_connected():
                    self._conn.disconnect()
            except (StompException, OSError) as exc:
                log.debug("closing the broker connection: %s", exc)
            self._conn = None

    def publish(self, messages: Sequence[OutgoingMessage]) -> dict[str, str]:
        """Send ``messages``; return ``key -> receipt id`` once every one is confirmed.

        Raises
        ------
        BrokerUnavailable
            Some messages were still unconfirmed after ``broker_retry_seconds``.
        """
        pending = {m.key: m for m in messages}
        done: dict[str, str] = {}
        deadline = time.monotonic() + self.settings.broker_retry_seconds
        attempt = 0
        while pending:
            problem = self._send_batch(pending, done)
            if not pending:
                break
            if time.monotonic() >= deadline:
                raise BrokerUnavailable(
                    f"The broker {self.settings.broker_host}:"
                    f"{self.settings.broker_port} confirmed {len(done)} of "
                    f"{len(done) + len(pending)} messages within "
                    f"{self.settings.broker_retry_seconds:g} s: {problem}. The "
                    "unconfirmed tasks stay eligible and are published next pass.",
                    done,
                )
            attempt += 1
            self.reconnects += 1
            log.warning(
                "broker: %d messages unconfirmed (%s), reconnecting (attempt %d)",
                len(pending),
                problem,
                attempt,
            )
            self.close()
            time.sleep(min(0.2 * 2 ** min(attempt, 5), 5.0))
        return done

    def _send_batch(
        self, pending: dict[str, OutgoingMessage], done: dict[str, str]
    ) -> str:
        """Send every pending message once and wait for receipts; return the problem."""
        try:
            conn = self._connect()
            listener = self._listener
            by_receipt: dict[str, str] = {}
            for key, message in list(pending.items()):
                receipt = f"{key}.{uuid.uuid4().hex[:8]}"
                by_receipt[receipt] = key
                conn.send(
                    self.destination,
                    message.body,
                    content_type="application/json",
                    headers={
                        "receipt": receipt,
                        "persistent": "true",
                        "idempotency-key": key,
                        "task-id": str(message.task_id),
                    },
                )
        except (StompException, OSError) as exc:
            return f"{type(exc).__name__}: {exc}"
        timeout = time.monotonic() + self.settings.broker_receipt_timeout_seconds
        with listener.condition:
            while True:
                for receipt in listener.received & by_receipt.keys():
                    key = by_receipt.pop(receipt)
                    if key in pending:
                        pending.pop(key)
                        done[key] = receipt
                if not by_receipt:
                    return ""
                if listener.lost or listener.error:
                    return listener.error or "connection lost"
                left = timeout - time.monotonic()
                if left <= 0:
                    return "no receipt in time"
                listener.condition.wait(left)
