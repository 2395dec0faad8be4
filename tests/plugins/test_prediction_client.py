"""How the JEDI refiner gets predictions: parameter-map conversion, in-process
client (cached champion) and HTTP client against the real service on loopback."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.plugins.http_client import HttpClient, prediction_from_json
from panda_predictor.plugins.jedi_prediction import client_from_environment
from panda_predictor.plugins.prediction_client import (
    InProcessClient,
    PredictionUnavailable,
    definition_from_param_map,
    param_map_fields,
    walltime_of,
)
from panda_predictor.settings import SettingsError, load_settings

PANDA_MAP = {
    "taskName": "mc23.recon.1",
    "userName": "atlas-prod",
    "vo": "atlas",
    "prodSourceLabel": "managed",
    "taskPriority": 500,
    "processingType": "recon",
    "taskType": "prod",
    "transPath": "Reco_tf.py",
    "transHome": "Athena-24.0.1",
    "transUses": "Atlas-24.0.1",
    "architecture": "x86_64-el9-gcc13-opt",
    "coreCount": 8,
    "workingGroup": "AP_REPR",
    "campaign": "MC23",
    "nFiles": 100,
    "nEvents": 50000,
    "nEventsPerJob": 1000,
    "messageDriven": True,
    "jobParameters": [{"type": "template", "param_type": "input", "value": "${IN}"}],
}


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    from panda_predictor.serving.bundle import load_bundle
    from panda_predictor.serving.predictor import Predictor

    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "1")


def param_maps(engine, settings, limit=10) -> list[tuple[int, dict]]:
    """Return (jediTaskID, PanDA-style parameter map) of a simulated database's
    defined tasks, up to ``limit``."""
    from panda_predictor.db.reader import find_eligible_tasks, read_task_features

    with engine.connect() as conn:
        ids = find_eligible_tasks(conn, settings, limit=limit)
        frame = read_task_features(conn, settings, ids)
    names = {
        "processingtype": "processingType",
        "tasktype": "taskType",
        "prodsourcelabel": "prodSourceLabel",
        "transhome": "transHome",
        "transuses": "transUses",
        "transpath": "transPath",
        "architecture": "architecture",
        "workinggroup": "workingGroup",
        "campaign": "campaign",
        "username": "userName",
    }
    maps = []
    for row in frame.to_dict("records"):
        task = {
            camel: row[ours]
            for ours, camel in names.items()
            if isinstance(row[ours], str)
        }
        task.update(
            taskName=f"sim.{row['jeditaskid']}",
            vo="atlas",
            taskPriority=1,
            coreCount=int(row["corecount"]),
        )
        maps.append((int(row["jeditaskid"]), task))
    return maps


@pytest.fixture(scope="module")
def defined_maps(simulated_sqlite):
    """Return PanDA-style parameter maps of the simulated database's defined tasks."""
    from panda_predictor.db.engine import make_engine

    engine = make_engine(simulated_sqlite)
    try:
        return param_maps(engine, simulated_sqlite)
    finally:
        engine.dispose()


def test_definition_keeps_what_the_models_read():
    definition = definition_from_param_map(42, PANDA_MAP)
    assert definition == {
        "jediTaskID": 42,
        "processingType": "recon",
        "taskType": "prod",
        "transPath": "Reco_tf.py",
        "transHome": "Athena-24.0.1",
        "transUses": "Atlas-24.0.1",
        "architecture": "x86_64-el9-gcc13-opt",
        "coreCount": 8,
        "workingGroup": "AP_REPR",
        "campaign": "MC23",
        "prodSourceLabel": "managed",
        "userName": "atlas-prod",
        "jobParameters": PANDA_MAP["jobParameters"],
    }
    from panda_predictor.taskdef import read_task_definitions

    row = read_task_definitions(definition).iloc[0]
    assert row["n_input_datasets"] == 1
    assert row["nfiles_sum"] != row["nfiles_sum"]  # NaN: JEDI has not counted yet


@pytest.mark.parametrize(
    ("task_id", "match"),
    [
        pytest.param("42", "must be an integer. Got '42'", id="str"),
        pytest.param(True, "must be an integer. Got True", id="bool"),
    ],
)
def test_definition_rejects_bad_task_ids(task_id, match):
    with pytest.raises(ValueError, match="'jediTaskID' field " + match):
        definition_from_param_map(task_id, PANDA_MAP)


def _prediction(decision="applied", **extra):
    return prediction_from_json(
        {
            "predictions": [
                {
                    **extra,
                    "jediTaskID": 5,
                    "decision": decision,
                    "reason": "confident",
                    "model": {"name": "panda-predictor", "version": "4"},
                    "targets": {
                        "ramcount": {
                            "value": 2500,
                            "unit": "MBPerCore",
                            "confidence": 0.9,
                        },
                        "cputime": {
                            "value": 3,
                            "unit": "HS06sPerEvent",
                            "confidence": 0.8,
                            "upper": 3.0,
                        },
                        "walltime": {
                            "value": 0,
                            "unit": "kSI2kseconds",
                            "confidence": 0.7,
                        },
                    },
                }
            ]
        },
        jedi_task_id=5,
    )


def test_prediction_from_the_service_json_and_its_map_fields():
    p = _prediction()
    assert (p.jeditaskid, p.model_name, p.model_version) == (5, "panda-predictor", "4")
    assert param_map_fields(p) == {
        "ramCount": 2500,
        "ramUnit": "MBPerCore",
        "cpuTime": 3000,
        "cpuTimeUnit": "mHS06sPerEvent",
        "skipScout": True,
    }
    assert param_map_fields(p, fixed_units=True)["ramUnit"] == "MBPerCoreFixed"
    assert walltime_of(p) == (0, "kSI2kseconds")


def test_the_service_s_early_remeasurement_reaches_the_prediction():
    # The refiner marks what it writes from it, as in process.
    assert _prediction(early_remeasure=True).early_remeasure is True
    assert _prediction().early_remeasure is False  # an older service says nothing
    with pytest.raises(ValueError, match="'early_remeasure' field must be true or"):
        _prediction(early_remeasure="yes")


@pytest.mark.parametrize(
    ("body", "error", "match"),
    [
        pytest.param([], ValueError, "must hold one prediction. Got 0", id="empty"),
        pytest.param("x", ValueError, "must be a JSON object. Got str", id="text"),
        pytest.param(
            {"decision": "applied"}, ValueError, "'targets' field", id="no-targets"
        ),
        pytest.param(
            {"decision": "maybe", "targets": {}},
            ValueError,
            "'decision' field must be one of",
            id="bad-decision",
        ),
        pytest.param(
            {"decision": "applied", "targets": {"ramcount": {}}},
            KeyError,
            "value",
            id="target-without-value",
        ),
    ],
)
def test_prediction_from_json_rejects_other_shapes(body, error, match):
    with pytest.raises(error, match=match):
        prediction_from_json(body, 1)


@pytest.mark.parametrize(
    ("url", "timeout", "match"),
    [
        pytest.param("ftp://x", 1.0, "'url' field must be an http", id="scheme"),
        pytest.param("http://x", 0, "'timeout' field must be a positive", id="zero"),
        pytest.param("http://x", "2", "'timeout' field must be a positive", id="str"),
    ],
)
def test_http_client_rejects_bad_options(url, timeout, match):
    with pytest.raises(ValueError, match=match):
        HttpClient(url, timeout)


def test_client_from_environment(monkeypatch, tmp_path):
    """The PANDA_PREDICTOR_REFINER_* variables reach the client through the settings."""
    monkeypatch.delenv("PANDA_PREDICTOR_REFINER_URL", raising=False)
    monkeypatch.setenv("PANDA_PREDICTOR_REFINER_RELOAD_SECONDS", "30")
    monkeypatch.delenv("PANDA_PREDICTOR_REFINER_HISTORY_REFRESH_SECONDS", raising=False)
    local = client_from_environment(load_settings(home=tmp_path))
    assert isinstance(local, InProcessClient) and local.reload_seconds == 30
    assert local.history_refresh_seconds == 300  # as 'serve --history-refresh'
    monkeypatch.setenv("PANDA_PREDICTOR_REFINER_HISTORY_REFRESH_SECONDS", "0")
    assert client_from_environment(load_settings()).history_refresh_seconds == 0
    monkeypatch.setenv("PANDA_PREDICTOR_REFINER_URL", "http://h:8080/")
    monkeypatch.setenv("PANDA_PREDICTOR_REFINER_TIMEOUT", "0.3")
    client = client_from_environment(load_settings(home=tmp_path))
    assert (client.url, client.timeout) == ("http://h:8080/v1/predictions", 0.3)
    for bad in ("soon", "0"):
        monkeypatch.setenv("PANDA_PREDICTOR_REFINER_TIMEOUT", bad)
        with pytest.raises(SettingsError, match="refiner_timeout"):
            load_settings(home=tmp_path)
    monkeypatch.setenv("PANDA_PREDICTOR_REFINER_TIMEOUT", " ")  # blank: the default
    assert load_settings(home=tmp_path).refiner_timeout == 2.0


def test_refiner_settings_come_from_the_config_file_too(monkeypatch, tmp_path):
    for name in ("URL", "TIMEOUT", "RELOAD_SECONDS"):
        monkeypatch.delenv(f"PANDA_PREDICTOR_REFINER_{name}", raising=False)
    config = tmp_path / "pp.yaml"
    config.write_text("refiner_url: http://h:8080\nrefiner_timeout: 1.5\n")
    client = client_from_environment(load_settings(config, home=tmp_path))
    assert (client.url, client.timeout) == ("http://h:8080/v1/predictions", 1.5)


def test_in_process_client_loads_once_and_keeps_a_model(
    predictor, defined_maps, tmp_path
):
    settings = load_settings(home=tmp_path)
    loads = []

    def factory():
        loads.append(1)
        if len(loads) > 1:
            raise ConnectionError("registry down")
        return predictor

    # No history here (tests/plugins/test_prediction_client_history.py has it).
    client = InProcessClient(
        settings,
        predictor_factory=factory,
        reload_seconds=3600,
        history_refresh_seconds=0,
    )
    from panda_predictor.taskdef import read_task_definitions

    for task_id, task in defined_maps[:3]:
        definition = definition_from_param_map(task_id, task)
        got = client.predict(definition)
        [want] = predictor.predict(read_task_definitions(definition))
        assert isinstance(got, TaskPrediction) and got.jeditaskid == task_id
        assert (got.decision, got.reason) == (want.decision, want.reason)
        assert got.targets == want.targets
    assert len(loads) == 1
    client.reload_seconds = 0  # stale: reload fails, the loaded model stays
    assert client.predict(definition).model_version == "1"
    assert len(loads) == 2


@pytest.mark.parametrize(
    ("factory_error", "definition", "reason"),
    [
        pytest.param(
            ConnectionError("registry down"),
            {"processingType": "x"},
            "no_model",
            id="no-model",
        ),
        pytest.param(None, {"coreCount": -3}, "invalid_task", id="invalid-task"),
    ],
)
def test_in_process_client_raises_unavailable(
    tmp_path, predictor, factory_error, definition, reason
):
    def factory():
        if factory_error:
            raise factory_error
        return predictor

    client = InProcessClient(load_settings(home=tmp_path), predictor_factory=factory)
    with pytest.raises(PredictionUnavailable) as info:
        client.predict(definition)
    assert info.value.reason == reason


@pytest.fixture
def serve():
    """Serve a WSGI app on a free loopback port in a thread; yield a starter."""
    from werkzeug.serving import make_server

    servers = []

    def start(app):
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_http_client_against_the_real_service(serve, predictor, defined_maps, tmp_path):
    from panda_predictor.http_api.app import create_app

    app = create_app(load_settings(home=tmp_path), predictor_loader=lambda: predictor)
    client = HttpClient(serve(app), timeout=5.0)
    for task_id, task in defined_maps[:4]:
        definition = definition_from_param_map(task_id, task)
        got = client.predict(definition)
        want = InProcessClient(
            load_settings(home=tmp_path), predictor_factory=lambda: predictor
        ).predict(definition)
        assert got.jeditaskid == task_id
        assert (got.decision, got.reason, got.model_version) == (
            want.decision,
            want.reason,
            "1",
        )
        assert {t: (v.value, v.unit) for t, v in got.targets.items()} == {
            t: (v.value, v.unit) for t, v in want.targets.items()
        }


def test_http_client_maps_service_errors(serve, tmp_path):
    from panda_predictor.http_api.app import create_app

    def no_model():
        raise FileNotFoundError("no champion")

    url = serve(create_app(load_settings(home=tmp_path), predictor_loader=no_model))
    with pytest.raises(PredictionUnavailable) as info:
        HttpClient(url, 5.0).predict({"jediTaskID": 1, "processingType": "recon"})
    assert info.value.reason == "http_503"
    with pytest.raises(PredictionUnavailable) as info:
        HttpClient(url, 5.0).predict({"jediTaskID": 1, "coreCont": 8})
    assert info.value.reason == "http_422"


class _Trickle(BaseHTTPRequestHandler):
    """Answers slowly, byte by byte, so only a total deadline stops the client."""

    def do_POST(self):  # noqa: N802  (http.server's naming)
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "100")
        self.end_headers()
        for _ in range(100):
            time.sleep(0.05)
            try:
                self.wfile.write(b" ")
                self.wfile.flush()
            except OSError:
                return

    def log_message(self, *args):
        pass


def test_http_client_gives_up_at_its_total_timeout():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = HttpClient(f"http://127.0.0.1:{server.server_port}", timeout=0.4)
        started = time.monotonic()
        with pytest.raises(PredictionUnavailable) as info:
            client.predict({"jediTaskID": 1})
        elapsed = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert info.value.reason == "timeout"
    assert elapsed < 1.5  # the trickle would take 5 s


def test_http_client_unreachable():
    with pytest.raises(PredictionUnavailable) as info:
        HttpClient("http://127.0.0.1:9", 1.0).predict({"jediTaskID": 1})
    assert info.value.reason == "unreachable"
