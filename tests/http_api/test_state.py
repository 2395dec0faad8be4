"""The service state: the model loads in the background, the database on demand."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from panda_predictor.db.engine import DatabaseError
from panda_predictor.http_api.state import (
    FAILED,
    LOADING,
    MissingTables,
    ModelUnavailable,
    ServiceState,
)
from panda_predictor.settings import load_settings


def _model(version="3"):
    return SimpleNamespace(model_name="panda-predictor", model_version=version)


def test_a_request_never_waits_for_the_load(tmp_path):
    release = threading.Event()

    def slow():
        release.wait(10)
        return _model()

    state = ServiceState(load_settings(home=tmp_path), slow)
    with pytest.raises(ModelUnavailable, match=LOADING) as first:
        state.predictor()  # starts the load in the background
    assert first.value.loading and state.loading
    release.set()
    assert state.wait_for_model(10).model_version == "3"
    assert state.predictor() is state.loaded


def test_a_failed_load_is_retried_only_after_retry_seconds(tmp_path):
    calls = []

    def broken():
        calls.append(1)
        raise OSError("registry down")

    state = ServiceState(load_settings(home=tmp_path), broken, retry_seconds=3600)
    state.load_now()
    assert state.load_error == "OSError: registry down"
    with pytest.raises(ModelUnavailable, match="No model could be loaded") as err:
        state.predictor()
    assert str(err.value) == FAILED and not err.value.loading
    assert calls == [1]


def test_a_failed_refresh_keeps_the_loaded_model(tmp_path):
    answers = iter([_model("1"), RuntimeError("gone"), _model("2")])

    def loader():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    state = ServiceState(load_settings(home=tmp_path), loader)
    state.load_now()
    state.load_now()
    assert state.loaded.model_version == "1" and state.load_error
    state.load_now()
    assert state.loaded.model_version == "2" and state.load_error is None


def test_a_missing_sqlite_file_is_reported_not_created(tmp_path):
    state = ServiceState(load_settings(home=tmp_path), _model)
    with pytest.raises(DatabaseError, match="does not exist"):
        state.engine()
    assert not list(tmp_path.glob("*.sqlite"))


def test_a_database_without_the_tables_names_them(tmp_path):
    settings = load_settings(home=tmp_path)
    state = ServiceState(settings, _model)
    sqlite_file = state._sqlite_file()
    sqlite_file.parent.mkdir(parents=True, exist_ok=True)
    sqlite_file.touch()
    with pytest.raises(MissingTables, match="Run 'panda-predictor db init'") as err:
        state.check_database()
    assert err.value.names == [
        "jedi_tasks",
        "jedi_datasets",
        "jobsarchived4",
        "pp_prediction_audit",
        "pp_schema_version",
    ]
    state.close()
    assert state.closed
