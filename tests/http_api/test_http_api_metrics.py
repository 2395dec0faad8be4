"""The service's own metrics: request counts by route, cached drift gauges."""

from __future__ import annotations

from flask import Flask
from prometheus_client import REGISTRY

from panda_predictor.http_api.metrics import DriftGauges, instrument, method_label


def test_made_up_methods_share_one_label():
    assert method_label("GET") == "GET"
    assert method_label("BREW") == "other"


def test_requests_are_counted_by_rule_method_and_status():
    app = Flask("metrics-test")
    instrument(app)

    @app.get("/things/<name>")
    def thing(name):
        return name

    def count(endpoint, status):
        labels = {"endpoint": endpoint, "method": "GET", "status": status}
        return REGISTRY.get_sample_value("panda_predictor_http_requests_total", labels)

    before = count("/things/<name>", "200") or 0.0
    client = app.test_client()
    client.get("/things/a")
    client.get("/things/b")
    client.get("/nowhere")
    assert count("/things/<name>", "200") == before + 2
    assert count("unmatched", "404") >= 1


def test_the_last_drift_run_is_read_at_most_once_per_max_age():
    now = [0.0]
    reads = []

    def read_last():
        reads.append(now[0])
        return None

    gauges = DriftGauges(read_last, max_age=30, clock=lambda: now[0])
    gauges.refresh()
    now[0] = 29.0
    gauges.refresh()
    now[0] = 30.0
    gauges.refresh()
    assert reads == [0.0, 30.0]


def test_a_failing_read_never_fails_the_scrape(caplog):
    def read_last():
        raise OSError("database down")

    now = [0.0]
    gauges = DriftGauges(read_last, max_age=1, clock=lambda: now[0])
    gauges.refresh()
    now[0] = 5.0
    gauges.refresh()  # the same cause again: logged at DEBUG, not repeated
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "database down" in warnings[0].getMessage()
