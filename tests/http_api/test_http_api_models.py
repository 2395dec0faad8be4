"""``GET /v1/models``: per target its kind, unit, classes and metrics."""

from __future__ import annotations

import math

import pytest

from panda_predictor.http_api import create_app
from panda_predictor.http_api.models import bp
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import load_settings


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "4")


def test_every_target_lists_its_classes_with_open_ends_as_null(tmp_path, predictor):
    app = create_app(load_settings(home=tmp_path), lambda: predictor)
    assert app.blueprints["models"] is bp

    body = app.test_client().get("/v1/models").get_json()

    assert (body["name"], body["version"], body["source"]) == (
        "panda-predictor",
        "4",
        "injected",
    )
    bundle = predictor.bundle
    assert set(body["targets"]) == set(bundle.models)
    for name, target in body["targets"].items():
        classes = target["classes"]
        assert [c["label"] for c in classes] == list(bundle.bins[name].labels)
        assert target["unit"] == bundle.bins[name].unit
        for c in classes:
            for edge in (c["lower"], c["upper"]):
                assert edge is None or math.isfinite(edge)
        assert classes[-1]["upper"] is None
        prefix = f"{name}."
        assert target["metrics"] == {
            key.removeprefix(prefix): value
            for key, value in bundle.metrics.items()
            if key.startswith(prefix)
        }
    assert not any(key.split(".")[0] in bundle.models for key in body["metrics"])


def test_without_a_model_it_is_503(tmp_path):
    def broken():
        raise RuntimeError("gone")

    response = (
        create_app(load_settings(home=tmp_path), broken).test_client().get("/v1/models")
    )
    assert response.status_code == 503
    assert "Try again later" in response.get_json()["description"]
