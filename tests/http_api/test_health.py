"""Liveness and readiness: /readyz names each failed check without infrastructure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from panda_predictor.db.engine import make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.http_api import create_app
from panda_predictor.http_api.health import bp
from panda_predictor.settings import load_settings


def _model():
    """What the readiness check reads of a loaded predictor."""
    return SimpleNamespace(model_name="panda-predictor", model_version="7")


def _broken():
    raise RuntimeError("no model here")


@pytest.fixture
def settings(tmp_path):
    return load_settings(home=tmp_path)


def _readyz(settings, loader):
    app = create_app(settings, loader)
    assert app.blueprints["health"] is bp
    try:
        response = app.test_client().get("/readyz")
        return response.status_code, response.get_json()
    finally:
        app.extensions["panda_predictor"].close()


def test_ready_with_a_model_and_a_database_with_its_tables(settings):
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    engine.dispose()

    status, body = _readyz(settings, _model)

    assert status == 200
    assert body["status"] == "ready" and body["failed"] == []
    assert body["checks"]["model"] == {
        "status": "ok",
        "detail": "panda-predictor version 7 (injected)",
    }


def test_not_ready_names_both_checks_without_paths(settings):
    status, body = _readyz(settings, _broken)

    assert status == 503
    assert body["status"] == "not ready"
    assert body["failed"] == ["model", "database"]
    assert body["checks"]["model"]["status"] == "failed"
    assert "no model here" not in str(body)  # the reason is in the log
    assert str(settings.home) not in str(body)


def test_missing_tables_are_named(settings):
    make_engine(settings).dispose()
    engine = make_engine(settings)
    with engine.begin() as conn:  # the file exists, but holds no table
        conn.exec_driver_sql("CREATE TABLE unrelated (x INTEGER)")
    engine.dispose()

    status, body = _readyz(settings, _model)

    assert status == 503 and body["failed"] == ["database"]
    assert body["checks"]["database"]["detail"].startswith("missing tables: jedi_tasks")


def test_a_draining_service_says_so(settings):
    app = create_app(settings, _model)
    app.extensions["panda_predictor"].draining.set()
    client = app.test_client()
    assert client.get("/readyz").get_json()["status"] == "draining"
    assert client.get("/healthz").get_json() == {"status": "ok"}
