"""Every error of the service is a JSON body with its real status code."""

from __future__ import annotations

import pytest
from flask import Flask
from werkzeug.exceptions import NotFound

from panda_predictor.http_api.errors import (
    RETRY_AFTER_SECONDS,
    ServiceUnavailable,
    error_response,
    register_error_handlers,
)
from panda_predictor.taskdef import TaskDefinitionError


@pytest.fixture
def client():
    app = Flask("errors-test")
    register_error_handlers(app)

    @app.get("/busy")
    def busy():
        raise ServiceUnavailable("Loading.", retry_after=RETRY_AFTER_SECONDS)

    @app.get("/invalid")
    def invalid():
        raise TaskDefinitionError(
            "The 'coreCount' field must be positive.", "coreCount"
        )

    @app.get("/bug")
    def bug():
        raise RuntimeError("secret detail of a bug")

    return app.test_client()


def test_a_temporary_503_says_when_to_retry(client):
    response = client.get("/busy")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert response.get_json() == {
        "code": 503,
        "name": "Service Unavailable",
        "description": "Loading.",
    }


def test_an_invalid_task_definition_is_422_naming_the_field(client):
    response = client.get("/invalid")
    assert response.status_code == 422
    assert "'coreCount' field must be positive" in response.get_json()["description"]


def test_a_bug_is_500_without_its_details(client, caplog):
    response = client.get("/bug")
    assert response.status_code == 500
    assert "secret detail" not in response.get_data(as_text=True)
    assert "secret detail of a bug" in caplog.text  # logged with its traceback


def test_flask_s_own_errors_are_json_too(client):
    assert client.get("/nowhere").get_json()["code"] == 404
    assert client.post("/busy").get_json()["name"] == "Method Not Allowed"


def test_error_response_keeps_the_status_and_headers_but_not_the_content_type():
    app = Flask("errors-test")
    with app.app_context():
        response = error_response(NotFound("No such task."))
    assert response.status_code == 404
    assert response.mimetype == "application/json"
    assert response.get_json()["description"] == "No such task."
