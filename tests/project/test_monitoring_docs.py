"""The shipped alert rules and Grafana dashboard parse and name only real series."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from panda_predictor.db.drift_runs import record_drift_run
from panda_predictor.db.engine import make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.hook.submit import run_hook_once
from panda_predictor.http_api import create_app
from panda_predictor.settings import load_settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
METRIC = re.compile(r"\bpanda_predictor_[a-z0-9_]+")


def alert_rules() -> list[dict]:
    document = yaml.safe_load((DOCS / "alerts.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> set[str]:
    """Return every sample name a hook pass plus a scrape of ``serve`` exports."""
    home = tmp_path_factory.mktemp("exported")
    settings = load_settings(home=home, mlflow_tracking_uri=f"sqlite:///{home}/m.db")
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    record_drift_run(
        engine,
        settings,
        verdict="no_drift",
        features={"corecount": {"psi": 0.01, "threshold": 0.2, "alarm": True}},
        under_allocation={"ramcount": 0.1},
        run_at=datetime(2026, 11, 1),
    )
    engine.dispose()
    report = run_hook_once(settings)  # an idle pass: no task, no model needed
    assert report.failure is None
    app = create_app(settings, predictor_loader=no_model, background_load=False)
    try:
        client = app.test_client()
        client.get("/healthz")
        page = client.get("/metrics").get_data(as_text=True)
    finally:
        app.extensions["panda_predictor"].close()
    return {
        sample.name
        for family in text_string_to_metric_families(page)
        for sample in family.samples
    }


def test_alert_rules_are_complete():
    rules = alert_rules()
    names = {rule["alert"] for rule in rules}
    # The four: drift, fallback rate, no pass for N minutes, kill switch.
    assert {
        "PandaPredictorDrift",
        "PandaPredictorFallbackRate",
        "PandaPredictorHookNoPass",
        "PandaPredictorKillSwitchOn",
    } <= names
    for rule in rules:
        assert rule["expr"].strip() and rule["for"], rule["alert"]
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
        assert rule["annotations"]["summary"], rule["alert"]


def test_dashboard_has_a_panel_per_alerted_series():
    exprs = " ".join(dashboard_exprs())
    for rule in alert_rules():
        for name in METRIC.findall(rule["expr"]):
            assert name in exprs, f"{name} ({rule['alert']}) has no dashboard panel"


@pytest.mark.parametrize("source", ["alerts.yml", "grafana-dashboard.json"])
def test_every_metric_named_is_one_the_code_exports(exported, source):
    exprs = (
        [r["expr"] for r in alert_rules()]
        if source == "alerts.yml"
        else dashboard_exprs()
    )
    named = {name for expr in exprs for name in METRIC.findall(expr)}
    assert named, source
    unknown = sorted(named - exported)
    assert not unknown, f"{source} names series nothing exports: {unknown}"


def no_model():
    """Stand in for a registry without a champion: /metrics must answer anyway."""
    raise LookupError("no champion in this test")
