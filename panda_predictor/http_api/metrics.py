"""``GET /metrics``: Prometheus text, and the request instrumentation behind it.

Besides the shared hook metrics (``panda_predictor_tasks_total``,
``panda_predictor_fallbacks_total``, ``panda_predictor_model_version``) the service
counts its requests and their latency per endpoint (the Flask route, not the raw
path), method and status, and the decisions it returned by reason kind. It also
exports the last drift check recorded in the database (``panda_predictor_drift_*``:
verdict, per-feature PSI, threshold and can-alarm, per-target under-allocation),
re-read at most every :data:`DRIFT_CACHE_SECONDS`. Every label
takes a bounded set of values: a made-up path is ``unmatched`` and a made-up method
``other``, so a scanner cannot grow the metrics without bound.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from flask import Blueprint, Flask, Response, current_app, g, request
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest

from panda_predictor.metrics import publish_drift_run

log = logging.getLogger(__name__)

#: Seconds the last drift run read from the database stays fresh for /metrics.
DRIFT_CACHE_SECONDS = 30.0
#: Key of the :class:`DriftGauges` of an app in ``app.extensions``.
DRIFT_EXTENSION = "panda_predictor_drift_gauges"

REQUESTS = Counter(
    "panda_predictor_http_requests_total",
    "HTTP requests answered, by endpoint, method and status code.",
    ["endpoint", "method", "status"],
)
LATENCY = Histogram(
    "panda_predictor_http_request_seconds",
    "Time to answer an HTTP request, by endpoint, method and status code.",
    ["endpoint", "method", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
DECISIONS = Counter(
    "panda_predictor_http_decisions_total",
    "Decisions returned by POST /v1/predictions, by decision and reason kind.",
    ["decision", "reason"],
)

#: HTTP methods counted under their own name; any other is counted as ``other``.
KNOWN_METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
)

bp = Blueprint("metrics", __name__)


def method_label(method: str) -> str:
    """Return ``method`` if it is a standard HTTP method, else ``other``."""
    return method if method in KNOWN_METHODS else "other"


@bp.get("/metrics")
def metrics() -> Response:
    """Return every registered metric in the Prometheus text format."""
    refresher = current_app.extensions.get(DRIFT_EXTENSION)
    if refresher is not None:
        refresher.refresh()
    return Response(generate_latest(), mimetype=CONTENT_TYPE_LATEST)


class DriftGauges:
    """Set the drift gauges from the last run in ``pp_drift_run``, at most every
    ``max_age`` seconds.

    The drift check is a short cron job; its result must outlive it, so the service
    reads it from the database the check recorded it in. Reading at scrape time, but
    cached, keeps a scrape cheap; a database failure leaves the previous values and
    is logged, never failing ``/metrics`` (an operator needs it most then).

    Parameters
    ----------
    read_last:
        Returns the newest recorded run (see ``recent_drift_runs``) or None.
    max_age:
        Seconds a read stays fresh.
    clock:
        Monotonic time source (tests pass their own).
    """

    def __init__(
        self,
        read_last: Callable[[], Mapping[str, Any] | None],
        max_age: float = DRIFT_CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read_last = read_last
        self._max_age = max_age
        self._clock = clock
        self._read_at: float | None = None
        self._last_error: str | None = None
        self._lock = threading.Lock()

    def refresh(self) -> None:
        """Re-read the last drift run if the cached one is older than ``max_age``."""
        with self._lock:
            now = self._clock()
            if self._read_at is not None and now - self._read_at < self._max_age:
                return
            self._read_at = now
            try:
                run = self._read_last()
            except Exception as exc:  # noqa: BLE001  /metrics must answer anyway
                # Once per distinct cause: a service without a database would
                # otherwise repeat it at every scrape.
                message = f"{type(exc).__name__}: {exc}"
                level = (
                    logging.DEBUG if message == self._last_error else logging.WARNING
                )
                self._last_error = message
                log.log(level, "last drift run not read for /metrics: %s", message)
                return
            self._last_error = None
        if run is not None:
            publish_drift_run(run)


def instrument(app: Flask) -> None:
    """Time and count every request of ``app`` (including errors)."""

    @app.before_request
    def _start() -> None:
        g.started = time.perf_counter()

    @app.after_request
    def _record(response: Response) -> Response:
        started = g.get("started")
        if started is not None:
            endpoint = request.url_rule.rule if request.url_rule else "unmatched"
            labels = (
                endpoint,
                method_label(request.method),
                str(response.status_code),
            )
            REQUESTS.labels(*labels).inc()
            LATENCY.labels(*labels).observe(time.perf_counter() - started)
        return response
