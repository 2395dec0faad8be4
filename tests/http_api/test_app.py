"""The Flask prediction service with a real trained bundle and Flask's test client."""

from __future__ import annotations

import json

import pytest

from panda_predictor.http_api import MAX_BODY_BYTES, create_app
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import load_settings

TASK = {
    "processingType": "simul",
    "taskType": "prod",
    "prodSourceLabel": "managed",
    "transPath": "Sim_tf.py",
    "transHome": "AtlasOffline-23.0.5",
    "transUses": "Atlas-23.0.5",
    "coreCount": 8,
    "taskName": "mc23.simul.test",
}
TARGETS = {"ramcount", "cputime", "iointensity", "walltime"}


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "1")


@pytest.fixture
def client(tmp_path, predictor):
    settings = load_settings(home=tmp_path, api_token="s3cret")
    app = create_app(settings, predictor_loader=lambda: predictor)
    with app.test_client() as c:
        yield c
    app.extensions["panda_predictor"].close()


def test_one_task_gets_every_target_with_range_value_and_features(client):
    response = client.post("/v1/predictions?explain=true", json=TASK)
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["history_features"] is False
    (task,) = body["predictions"]
    assert task["decision"] in ("applied", "kept_scouts")
    assert task["scouts"] == ("skipped" if task["decision"] == "applied" else "kept")
    assert task["reason"]
    assert task["model"] == {"name": "panda-predictor", "version": "1"}
    assert set(task["targets"]) == TARGETS
    ram = task["targets"]["ramcount"]
    assert ram["unit"] == "MBPerCore"
    assert sum(ram["probabilities"]) == pytest.approx(1.0, abs=1e-3)
    assert 0.0 <= ram["confidence"] <= 1.0
    assert ram["lower"] is None or ram["lower"] < ram["value"]
    assert len(ram["top_features"]) == 5
    assert "SHAP" in ram["explanation"]
    names = {f["feature"] for f in ram["top_features"]}
    assert names and all(
        isinstance(f["contribution"], float) for f in ram["top_features"]
    )
    assert names <= set(load_bundle_features(client))


def test_explanations_only_on_request_with_the_same_prediction(client):
    plain = client.post("/v1/predictions", json=TASK).get_json()["predictions"][0]
    explained = client.post("/v1/predictions?explain=1", json=TASK).get_json()
    explained = explained["predictions"][0]
    for name, target in plain["targets"].items():
        assert target["top_features"] == []
        assert target["explanation"] == "not requested (add ?explain=true)"
        other = explained["targets"][name]
        assert other["top_features"]
        for key in ("class_index", "value", "confidence", "probabilities"):
            assert target[key] == other[key]
    assert plain["decision"] == explained["decision"]


def test_a_bad_explain_flag_is_a_clear_400(client):
    response = client.post("/v1/predictions?explain=maybe", json=TASK)
    assert response.status_code == 400
    description = response.get_json()["description"]
    assert "'explain' query parameter must be one of" in description
    assert "Got 'maybe' instead" in description


def load_bundle_features(client):
    state = client.application.extensions["panda_predictor"]
    return state.loaded.bundle.features.feature_names_out_


def test_a_list_and_a_tasks_wrapper_give_one_prediction_per_task(client):
    tasks = [dict(TASK, jediTaskID=11), dict(TASK, coreCount=1, jediTaskID=12)]
    for body in (tasks, {"tasks": tasks}):
        response = client.post("/v1/predictions", json=body)
        assert response.status_code == 200
        ids = [p["jediTaskID"] for p in response.get_json()["predictions"]]
        assert ids == [11, 12]


def test_prediction_matches_the_predictor_used_directly(client, predictor):
    from panda_predictor.taskdef import read_task_definitions

    direct = predictor.predict(read_task_definitions(TASK))[0]
    body = client.post("/v1/predictions", json=TASK).get_json()["predictions"][0]
    for name, target in direct.targets.items():
        assert body["targets"][name]["class_index"] == target.class_index
        assert body["targets"][name]["value"] == target.value
    assert body["decision"] == direct.decision


@pytest.mark.parametrize(
    ("body", "status", "match"),
    [
        (json.dumps(dict(TASK, coreCont=8)), 422, "'coreCont' field"),
        (
            json.dumps(dict(TASK, coreCount="eight")),
            422,
            "'coreCount' field must be an integer",
        ),
        (
            json.dumps(dict(TASK, coreCount=-3)),
            422,
            "'coreCount' field must be a positive integer. Got -3 instead.",
        ),
        (json.dumps([]), 422, "'tasks' field must be"),
        (json.dumps({"tasks": "x"}), 422, "'tasks' field must be a list"),
        ('{"processingType": "simul",', 400, "malformed JSON instead: Expecting"),
        (
            json.dumps(dict(TASK, transPath="x" * (MAX_BODY_BYTES + 10))),
            413,
            "exceeds the capacity limit",
        ),
    ],
    ids=[
        "unknown-field",
        "wrong-type",
        "negative-corecount",
        "empty-list",
        "tasks-not-list",
        "malformed-json",
        "oversize-body",
    ],
)
def test_bad_requests_get_json_errors_naming_the_problem(client, body, status, match):
    response = client.post(
        "/v1/predictions", data=body, content_type="application/json"
    )
    assert response.status_code == status
    error = response.get_json()
    assert error["code"] == status
    assert error["name"]
    assert match in error["description"]


@pytest.mark.parametrize(
    ("method", "url", "status"),
    [
        ("get", "/v1/nothing", 404),
        ("get", "/v1/predictions", 405),
        ("delete", "/v1/models", 405),
        ("get", "/v1/tasks/abc/prediction", 422),
    ],
    ids=["unknown-route", "wrong-method", "delete-models", "non-integer-task-id"],
)
def test_routing_errors_are_json(client, method, url, status):
    response = getattr(client, method)(url)
    assert response.status_code == status
    assert response.get_json()["code"] == status


def test_models_describes_the_loaded_champion(client):
    body = client.get("/v1/models").get_json()
    assert (body["name"], body["version"], body["source"]) == (
        "panda-predictor",
        "1",
        "injected",
    )
    assert set(body["targets"]) == TARGETS
    ram = body["targets"]["ramcount"]
    assert ram["kind"] == "xgboost"
    assert ram["unit"] == "MBPerCore"
    assert len(ram["classes"]) >= 2
    assert ram["classes"][-1]["upper"] is None


def test_model_unavailable_is_503_with_the_reason_and_counted(tmp_path):
    from prometheus_client import REGISTRY

    def broken():
        raise FileNotFoundError("bundle folder is gone")

    before = (
        REGISTRY.get_sample_value(
            "panda_predictor_fallbacks_total",
            {"hook": "http", "reason": "FileNotFoundError"},
        )
        or 0.0
    )
    app = create_app(load_settings(home=tmp_path), predictor_loader=broken)
    client = app.test_client()
    response = client.post("/v1/predictions", json=TASK)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    description = response.get_json()["description"]
    assert "Keep the scouts" in description
    assert "bundle folder is gone" not in description  # logged, not shown
    assert client.get("/v1/models").status_code == 503
    after = REGISTRY.get_sample_value(
        "panda_predictor_fallbacks_total",
        {"hook": "http", "reason": "FileNotFoundError"},
    )
    assert after == before + 1


def test_no_champion_in_an_empty_registry_is_503(tmp_path):
    settings = load_settings(
        home=tmp_path, mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}"
    )
    app = create_app(settings)
    app.extensions["panda_predictor"].wait_for_model(60)
    response = app.test_client().post("/v1/predictions", json=TASK)
    assert response.status_code == 503
    description = response.get_json()["description"]
    assert "No model could be loaded" in description
    assert str(tmp_path) not in description  # no store path in a public body


def test_healthz_is_always_ok(tmp_path):
    def broken():
        raise RuntimeError("no model")

    client = create_app(load_settings(home=tmp_path), broken).test_client()
    assert client.get("/healthz").get_json() == {"status": "ok"}


def test_metrics_count_requests_latency_and_decisions(client):
    client.post("/v1/predictions", json=TASK)
    client.get("/v1/nothing")
    text = client.get("/metrics").get_data(as_text=True)
    assert (
        'panda_predictor_http_requests_total{endpoint="/v1/predictions",'
        'method="POST",status="200"}'
    ) in text
    assert 'endpoint="unmatched",method="GET",status="404"' in text
    assert "panda_predictor_http_request_seconds_bucket" in text
    assert "panda_predictor_http_decisions_total{decision=" in text
    assert 'panda_predictor_model_version{model_name="panda-predictor"} 1.0' in text
    assert "# HELP panda_predictor_fallbacks_total" in text


def _nested(depth: int) -> str:
    return '{"jobParameters": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize(
    ("body", "status", "match"),
    [
        (_nested(1000), 400, "nested at most 32 levels deep. Got deeper nesting"),
        (_nested(33), 400, "nested at most 32 levels deep"),
        (
            json.dumps(dict(TASK, creationDate="0001-01-01T00:00:00+01:00")),
            422,
            "'creationDate' field must be a date and time from 1970-01-01",
        ),
        (
            json.dumps(dict(TASK, creationDate="2150-01-01T00:00:00")),
            422,
            "before 2100-01-01 (UTC). Got '2150-01-01T00:00:00' instead.",
        ),
        (
            '{"nEvents": 1' + "0" * 400 + "}",
            422,
            "'nEvents' field must be at most 9223372036854775807. Got 1000",
        ),
        (
            '{"inDS": [{"name": "a", "nFiles": ' + str(2**63) + "}]}",
            422,
            "'inDS.0.nFiles' field must be at most 9223372036854775807",
        ),
        ('{"nEvents": 1e400}', 422, "'nEvents' field must be an integer. Got inf"),
        (
            json.dumps(dict(TASK, jediTaskID=2**63)),
            422,
            "'jediTaskID' field must be at most 9223372036854775807. "
            "Got 9223372036854775808 instead.",
        ),
    ],
    ids=[
        "json-1000-deep",
        "json-33-deep",
        "creationdate-year-1-with-offset",
        "creationdate-after-2100",
        "count-400-digits",
        "dataset-count-2-63",
        "count-1e400",
        "task-id-2-63",
    ],
)
def test_fuzz_findings_are_4xx_naming_the_field(client, body, status, match):
    response = client.post(
        "/v1/predictions", data=body, content_type="application/json"
    )
    assert response.status_code == status, response.get_json()
    assert match in response.get_json()["description"]


def test_depth_limit_admits_the_deepest_real_definition(client):
    body = {"tasks": [dict(TASK, inDS=[{"name": "mc23.EVNT", "nFiles": 3}])]}
    assert client.post("/v1/predictions", json=body).status_code == 200


@pytest.mark.parametrize(
    "task_id",
    [str(2**63), "0", "-1", "1_000", "٣", "9" * 400],
    ids=["2-63", "zero", "negative", "underscore", "arabic-digit", "400-digits"],
)
@pytest.mark.parametrize("method", ["get", "head", "post"])
def test_task_ids_outside_pandas_range_are_422(client, method, task_id):
    response = getattr(client, method)(
        f"/v1/tasks/{task_id}/prediction",
        headers={"Authorization": "Bearer s3cret"},
    )
    assert response.status_code == 422
    if method != "head":
        description = response.get_json()["description"]
        assert "'jediTaskID' path parameter must be an integer from 1 to " in (
            description
        )
        assert len(description) < 200  # a 400-digit id is not echoed in full


def test_made_up_methods_share_one_metric_series(client):
    for method in ("FOO", "BAR", "X" * 30):
        assert client.open("/v1/models", method=method).status_code == 405
    text = client.get("/metrics").get_data(as_text=True)
    assert 'method="other"' in text
    assert 'method="FOO"' not in text and 'method="BAR"' not in text


def test_a_full_queue_sheds_predictions_but_not_probes(client):
    shedder = client.application.wsgi_app
    shedder.waiting = lambda: 11  # one above the default bound of 10
    response = client.post("/v1/predictions", json=TASK)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert (
        "overloaded: more than 10 requests are waiting"
        in (response.get_json()["description"])
    )
    assert client.get("/healthz").status_code == 200
    assert client.get("/metrics").status_code == 200
    assert "panda_predictor_http_shed_total" in client.get("/metrics").text
    shedder.waiting = lambda: 10  # at the bound: admitted
    assert client.post("/v1/predictions", json=TASK).status_code == 200


def test_readyz_says_loading_while_the_model_loads_and_healthz_answers(
    tmp_path, predictor
):
    import threading

    release = threading.Event()

    def slow():
        release.wait(30)
        return predictor

    app = create_app(load_settings(home=tmp_path), slow, background_load=True)
    client = app.test_client()
    try:
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.get_json()["checks"]["model"]["status"] == "loading"
        busy = client.post("/v1/predictions", json=TASK)
        assert busy.status_code == 503
        assert "still loading" in busy.get_json()["description"]
        assert busy.headers["Retry-After"] == "5"
        assert client.get("/healthz").status_code == 200
    finally:
        release.set()
    app.extensions["panda_predictor"].wait_for_model(30)
    assert client.post("/v1/predictions", json=TASK).status_code == 200
    assert client.get("/readyz").get_json()["checks"]["model"]["status"] == "ok"
