"""``/v1/tasks/<id>/prediction``: writes need the bearer token; ids are checked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from panda_predictor.http_api import create_app
from panda_predictor.http_api.tasks import bp
from panda_predictor.settings import load_settings


def _client(tmp_path, token):
    settings = load_settings(home=tmp_path, api_token=token)
    app = create_app(
        settings, lambda: SimpleNamespace(model_name="m", model_version="1")
    )
    assert app.blueprints["tasks"] is bp
    return app.test_client()


def test_writes_are_disabled_without_a_configured_token(tmp_path):
    response = _client(tmp_path, None).post("/v1/tasks/5/prediction")
    assert response.status_code == 503
    assert "PANDA_PREDICTOR_API_TOKEN" in response.get_json()["description"]


@pytest.mark.parametrize(
    "header, got",
    [
        ({}, "Got no header instead"),
        ({"Authorization": "Bearer wrong"}, "Got a wrong or malformed token"),
        ({"Authorization": "Basic s3cret"}, "Got a wrong or malformed token"),
    ],
    ids=["no-header", "wrong-token", "wrong-scheme"],
)
def test_a_wrong_token_is_401_asking_for_bearer(tmp_path, header, got):
    response = _client(tmp_path, "s3cret").post(
        "/v1/tasks/5/prediction", headers=header
    )
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].lower().startswith("bearer")
    assert got in response.get_json()["description"]


def test_a_task_id_outside_panda_s_range_is_422_for_reads_too(tmp_path):
    response = _client(tmp_path, "s3cret").get("/v1/tasks/0/prediction")
    assert response.status_code == 422
    assert "'jediTaskID' path parameter" in response.get_json()["description"]
