"""``GET /metrics``: Prometheus text, and the request instrumentation behind it.

Besides the shared hook metrics (``panda_predictor_tasks_total``,
``panda_predictor_fallbacks_total``, ``panda_predictor_model_version``) the service
counts its requests and their latency per endpoint (the Flask route, not the raw
path), method and status, and the decisions it returned by reason kind. Every label
takes a bounded set of values: a made-up path is ``unmatched`` and a made-up method
``other``, so a scanner cannot grow the metrics without bound.
"""

from __future__ import annotations

import time

from flask import Blueprint, Flask, Response, g, request
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest

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
    return Response(generate_latest(), mimetype=CONTENT_TYPE_LATEST)


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
