"""``GET /metrics``: Prometheus text, and the request instrumentation behind it.

Besides the shared hook metrics (``panda_predictor_tasks_total``,
``panda_predictor_fallbacks_total``, ``panda_predictor_model_version``) the service
counts its requests and their latency per endpoint (the Flask route, not the raw
path, so label values stay bounded) and status, and the decisions it returned by
reason kind.
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

bp = Blueprint("metrics", __name__)


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
            labels = (endpoint, request.method, str(response.status_code))
            REQUESTS.labels(*labels).inc()
            LATENCY.labels(*labels).observe(time.perf_counter() - started)
        return response
