"""Load shedding in front of the app: a quick 503 above the bound, probes always."""

from __future__ import annotations

import json

from prometheus_client import REGISTRY

from panda_predictor.http_api.admission import (
    NEVER_SHED,
    SHED_RETRY_AFTER_SECONDS,
    LoadShedder,
    no_queue,
)


def inner_app(environ, start_response):
    """The protected app: answers 200 with its path."""
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [environ["PATH_INFO"].encode()]


def call(app, path):
    """Return (status, headers, body) of one WSGI call."""
    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app({"PATH_INFO": path}, start_response))
    return seen["status"], seen["headers"], body


def _shed_total() -> float:
    return REGISTRY.get_sample_value("panda_predictor_http_shed_total") or 0.0


def test_requests_pass_while_the_queue_is_within_its_bound():
    shedder = LoadShedder(inner_app, max_waiting=2)
    assert shedder.waiting is no_queue and no_queue() == 0
    shedder.waiting = lambda: 2
    assert call(shedder, "/v1/predictions") == (
        "200 OK",
        {"Content-Type": "text/plain"},
        b"/v1/predictions",
    )


def test_above_the_bound_a_request_is_shed_with_retry_after_and_counted():
    shedder = LoadShedder(inner_app, max_waiting=2)
    shedder.waiting = lambda: 3
    before = _shed_total()

    status, headers, body = call(shedder, "/v1/predictions")

    assert status.startswith("503")
    assert headers["Retry-After"] == str(SHED_RETRY_AFTER_SECONDS)
    assert int(headers["Content-Length"]) == len(body)
    answer = json.loads(body)
    assert (
        answer["code"] == 503
        and "more than 2 requests are waiting" in (answer["description"])
    )
    assert _shed_total() == before + 1


def test_probes_and_metrics_are_never_shed():
    shedder = LoadShedder(inner_app, max_waiting=0)
    shedder.waiting = lambda: 100
    for path in sorted(NEVER_SHED):
        assert call(shedder, path)[0] == "200 OK", path
