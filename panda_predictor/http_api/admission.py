"""Shed load: answer 503 with ``Retry-After`` at once when too many requests wait.

Without a bound, a server offered more than it can do queues every request: at
1,000 requests/s the median answer took 7 s, 12 % timed out and even ``/healthz``
waited 3 s. A quick 503 is better for everyone: the caller keeps its scouts or
retries elsewhere, and the requests that are admitted are answered in time.

:class:`LoadShedder` is WSGI middleware in front of the Flask app. It asks a probe
how many requests wait for a worker thread (the server's queue; see
:mod:`panda_predictor.http_api.server`) and, above ``max_waiting``, answers a small
JSON 503 without running Flask, so a shed request costs little. The probes
(``/healthz``, ``/readyz``) and ``/metrics`` are never shed: an operator must see an
overloaded service as alive and be able to measure it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import Counter

SHED = Counter(
    "panda_predictor_http_shed_total",
    "Requests answered 503 at once because too many requests were waiting.",
)

#: Paths answered even when overloaded.
NEVER_SHED = frozenset({"/healthz", "/readyz", "/metrics"})

#: Seconds an overloaded service asks callers to wait before retrying.
SHED_RETRY_AFTER_SECONDS = 1


def no_queue() -> int:
    """Return 0: the default probe, for servers that expose no queue (tests)."""
    return 0


class LoadShedder:
    """WSGI middleware answering 503 while more than ``max_waiting`` requests wait.

    Parameters
    ----------
    app:
        The WSGI application to protect.
    max_waiting:
        Most requests allowed to wait for a worker; above it new ones are shed.
    """

    def __init__(self, app: Callable[..., Iterable[bytes]], max_waiting: int) -> None:
        self.app = app
        self.max_waiting = max_waiting
        self.waiting: Callable[[], int] = no_queue

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        """Pass the request on, or shed it when the queue is over its bound."""
        if (
            environ.get("PATH_INFO", "") not in NEVER_SHED
            and self.waiting() > self.max_waiting
        ):
            SHED.inc()
            body = json.dumps(
                {
                    "code": 503,
                    "name": "Service Unavailable",
                    "description": "The service is overloaded: more than "
                    f"{self.max_waiting} requests are waiting. Retry after "
                    f"{SHED_RETRY_AFTER_SECONDS} s (a task keeps its scouts).",
                }
            ).encode()
            start_response(
                "503 SERVICE UNAVAILABLE",
                [
                    ("Content-Type", "application/json"),
                    ("Content-Length", str(len(body))),
                    ("Retry-After", str(SHED_RETRY_AFTER_SECONDS)),
                ],
            )
            return [body]
        return self.app(environ, start_response)
