"""``POST /v1/predictions``: the explain flag, and a 503 that keeps the scouts."""

from __future__ import annotations

import pytest
from werkzeug.exceptions import BadRequest

from panda_predictor.http_api import create_app
from panda_predictor.http_api.errors import RETRY_AFTER_SECONDS
from panda_predictor.http_api.predictions import (
    FLAGS,
    explain_requested,
    model_unavailable,
)
from panda_predictor.http_api.state import ModelUnavailable
from panda_predictor.settings import load_settings


@pytest.fixture
def app(tmp_path):
    def broken():
        raise RuntimeError("no model")

    return create_app(load_settings(home=tmp_path), broken)


@pytest.mark.parametrize("text", sorted(FLAGS))
def test_each_spelling_of_the_flag_is_read(app, text):
    with app.test_request_context(f"/v1/predictions?explain={text.upper()}"):
        assert explain_requested() is FLAGS[text]


def test_no_flag_means_no_explanations_and_a_bad_one_is_400(app):
    with app.test_request_context("/v1/predictions"):
        assert explain_requested() is False
    with (
        app.test_request_context("/v1/predictions?explain=maybe"),
        pytest.raises(BadRequest, match="Got 'maybe' instead"),
    ):
        explain_requested()


def test_model_unavailable_asks_to_retry_and_says_what_to_do():
    error = model_unavailable(ModelUnavailable("The model is still loading."), "Wait.")
    assert error.code == 503
    assert error.description == (
        "No model can predict right now: The model is still loading. Wait."
    )
    assert dict(error.get_headers())["Retry-After"] == str(RETRY_AFTER_SECONDS)


def test_a_bad_body_is_refused_before_the_model_is_asked(app):
    client = app.test_client()
    assert client.post("/v1/predictions", data=b"{").status_code == 400
    assert client.post("/v1/predictions", json=[]).status_code == 422
    response = client.post("/v1/predictions", json={"coreCount": 8})
    assert response.status_code == 503
    assert "Keep the scouts" in response.get_json()["description"]
