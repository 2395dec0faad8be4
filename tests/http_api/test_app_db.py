"""The service's database endpoints against real SQLite and PostgreSQL databases."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.http_api import create_app
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import load_settings

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "1")


def _simulated_db(settings, seed: int, n_defined: int):
    """Fill the database of ``settings`` with a small simulated PanDA history."""
    from panda_predictor.db.migrations import init_database
    from pipelines.simulation import SimulationConfig, simulate_history
    from pipelines.simulation.history_writer import load_history

    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    config = SimulationConfig(n_tasks=40, n_defined=n_defined, seed=seed)
    load_history(engine, settings, simulate_history(config, progress=False))
    engine.dispose()
    return settings.model_copy(update={"api_token": TOKEN})


@pytest.fixture
def loaded_db(settings, seed):
    """Return settings (SQLite or PostgreSQL) of a small simulated PanDA database."""
    return _simulated_db(settings, seed, n_defined=4)


def _defined_ids(settings) -> list[int]:
    engine = make_engine(settings)
    tasks = get_panda_tables(settings, engine).jedi_tasks
    with engine.connect() as conn:
        ids = (
            conn.execute(
                sa.select(tasks.c.jeditaskid)
                .where(tasks.c.status == "defined", tasks.c.splitrule.like("%US=%"))
                .order_by(tasks.c.jeditaskid)
            )
            .scalars()
            .all()
        )
    engine.dispose()
    return list(ids)


def _client(settings, predictor):
    app = create_app(settings, predictor_loader=lambda: predictor)
    return app, app.test_client()


def test_post_runs_the_hook_once_and_get_reads_the_audit_row(loaded_db, predictor):
    task_id = _defined_ids(loaded_db)[0]
    app, client = _client(loaded_db, predictor)
    try:
        assert client.get(f"/v1/tasks/{task_id}/prediction").status_code == 404
        response = client.post(f"/v1/tasks/{task_id}/prediction", headers=AUTH)
        assert response.status_code == 200, response.get_json()
        body = response.get_json()
        assert body["jediTaskID"] == task_id
        assert body["written"] == (body["outcome"] == "applied")
        assert body["outcome"] == body["prediction"]["decision"]
        audit = client.get(f"/v1/tasks/{task_id}/prediction").get_json()["audit"]
        assert audit["jeditaskid"] == task_id
        assert audit["decision"] == body["outcome"]
        assert audit["model_version"] == "1"
        assert audit["ramcount_unit"].startswith("MBPerCore")
        # Idempotent: the task is no longer eligible, nothing is written twice.
        again = client.post(f"/v1/tasks/{task_id}/prediction", headers=AUTH)
        assert again.status_code == 409
        assert "already audited: decision" in again.get_json()["description"]
    finally:
        app.extensions["panda_predictor"].close()


@pytest.fixture
def many_new_tasks_db(settings, seed):
    """Return settings of a database like ``loaded_db`` with 30 newly defined tasks."""
    return _simulated_db(settings, seed, n_defined=30)


def _waiting_for_scouts(settings) -> list[int]:
    """Return the tasks the hook may handle: defined or ready, US= in SPLITRULE."""
    engine = make_engine(settings)
    tasks = get_panda_tables(settings, engine).jedi_tasks
    with engine.connect() as conn:
        ids = conn.execute(
            sa.select(tasks.c.jeditaskid)
            .where(
                tasks.c.status.in_(["defined", "ready"]),
                tasks.c.splitrule.like("%US=%"),
            )
            .order_by(tasks.c.jeditaskid)
        )
        found = list(ids.scalars())
    engine.dispose()
    return found


def test_posting_every_waiting_task_applies_at_least_one(many_new_tasks_db, predictor):
    """The write path really writes: over 30+ tasks waiting for scouts the model is
    confident on at least one, whose scouts are then skipped in JEDI_TASKS; the
    others keep their scout rule untouched."""
    from panda_predictor.core.domain.splitrule import has_scout_rule
    from tests.test_db_support import task_row

    loaded_db = many_new_tasks_db
    ids = _waiting_for_scouts(loaded_db)
    assert len(ids) >= 30
    app, client = _client(loaded_db, predictor)
    try:
        outcomes = {}
        for task_id in ids:
            response = client.post(f"/v1/tasks/{task_id}/prediction", headers=AUTH)
            assert response.status_code == 200, response.get_json()
            outcomes[task_id] = response.get_json()["outcome"]
        assert set(outcomes.values()) <= {"applied", "kept_scouts"}, outcomes
        applied = [t for t, outcome in outcomes.items() if outcome == "applied"]
        assert len(applied) >= 1, outcomes
        engine = make_engine(loaded_db)
        try:
            for task_id, outcome in outcomes.items():
                row = task_row(engine, loaded_db, task_id)
                audit = client.get(f"/v1/tasks/{task_id}/prediction").get_json()
                assert audit["audit"]["decision"] == outcome
                assert has_scout_rule(row["splitrule"]) == (outcome != "applied")
                if outcome == "applied":
                    assert row["ramcount"] == audit["audit"]["ramcount_value"]
        finally:
            engine.dispose()
    finally:
        app.extensions["panda_predictor"].close()


def _set_task(settings, task_id, **values):
    engine = make_engine(settings)
    tasks = get_panda_tables(settings, engine).jedi_tasks
    with engine.begin() as conn:
        conn.execute(
            sa.update(tasks).where(tasks.c.jeditaskid == task_id).values(**values)
        )
    engine.dispose()


class _FailingPredictor:
    """The real predictor, except that predicting raises (a broken model)."""

    def __init__(self, predictor):
        self._predictor = predictor

    def __getattr__(self, name):
        return getattr(self._predictor, name)

    def predict(self, *args, **kwargs):
        raise ValueError("the model cannot score this task")


def test_post_of_a_task_that_cannot_be_predicted_is_422_with_the_reason(
    loaded_db, predictor
):
    task_id = _defined_ids(loaded_db)[0]
    app, client = _client(loaded_db, _FailingPredictor(predictor))
    try:
        response = client.post(f"/v1/tasks/{task_id}/prediction", headers=AUTH)
        assert response.status_code == 422, response.get_json()
        description = response.get_json()["description"]
        assert f"jediTaskID={task_id} could not be predicted" in description
        assert "the model cannot score this task" in description
        assert "audited with decision 'error'" in description
        audit = client.get(f"/v1/tasks/{task_id}/prediction").get_json()["audit"]
        assert audit["decision"] == "error"
    finally:
        app.extensions["panda_predictor"].close()


def test_post_of_an_invalid_task_keeps_its_scouts_and_says_why(loaded_db, predictor):
    task_id = _defined_ids(loaded_db)[0]
    _set_task(loaded_db, task_id, corecount=-3)
    app, client = _client(loaded_db, predictor)
    try:
        response = client.post(f"/v1/tasks/{task_id}/prediction", headers=AUTH)
        assert response.status_code == 200, response.get_json()
        body = response.get_json()
        assert body["outcome"] == "kept_scouts" and not body["written"]
        assert (
            "'corecount' field must be a positive integer"
            in (body["prediction"]["reason"])
        )
    finally:
        app.extensions["panda_predictor"].close()


def test_post_of_a_task_jedi_holds_is_409_with_retry_after(loaded_db, predictor):
    task_id = _defined_ids(loaded_db)[0]
    _set_task(loaded_db, task_id, lockedby="JobGenerator-1")
    app, client = _client(loaded_db, predictor)
    try:
        held = client.post(f"/v1/tasks/{task_id}/prediction", headers=AUTH)
        assert held.status_code == 409, held.get_json()
        assert "LOCKEDBY is set" in held.get_json()["description"]
        assert held.headers["Retry-After"] == "5"
        assert client.get(f"/v1/tasks/{task_id}/prediction").status_code == 404
        _set_task(loaded_db, task_id, lockedby=None)
        released = client.post(f"/v1/tasks/{task_id}/prediction", headers=AUTH)
        assert released.status_code == 200, released.get_json()
    finally:
        app.extensions["panda_predictor"].close()


def test_post_for_an_unknown_task_is_404(loaded_db, predictor):
    app, client = _client(loaded_db, predictor)
    response = client.post("/v1/tasks/999999999/prediction", headers=AUTH)
    app.extensions["panda_predictor"].close()
    assert response.status_code == 404
    assert "jediTaskID=999999999" in response.get_json()["description"]


@pytest.mark.parametrize(
    ("token", "headers", "status", "match"),
    [
        (TOKEN, {}, 401, "Got no header instead"),
        (TOKEN, {"Authorization": "Bearer wrong"}, 401, "wrong or malformed token"),
        (TOKEN, {"Authorization": f"Basic {TOKEN}"}, 401, "wrong or malformed"),
        (None, AUTH, 503, "Writes are disabled"),
    ],
    ids=["no-header", "wrong-token", "wrong-scheme", "no-token-configured"],
)
def test_writes_need_the_configured_bearer_token(
    fresh_sqlite, predictor, token, headers, status, match
):
    settings = fresh_sqlite.model_copy(update={"api_token": token})
    task_id = _defined_ids(settings)[0]
    app, client = _client(settings, predictor)
    response = client.post(f"/v1/tasks/{task_id}/prediction", headers=headers)
    assert response.status_code == status
    assert match in response.get_json()["description"]
    if status == 401:
        assert response.headers["WWW-Authenticate"].lower().startswith("bearer")
    # Nothing was written.
    assert client.get(f"/v1/tasks/{task_id}/prediction").status_code == 404
    app.extensions["panda_predictor"].close()


def test_readyz_is_200_with_model_and_database(fresh_sqlite, predictor):
    app, client = _client(fresh_sqlite, predictor)
    response = client.get("/readyz")
    app.extensions["panda_predictor"].close()
    assert response.status_code == 200
    assert response.get_json()["failed"] == []


def test_readyz_is_503_naming_the_database_when_the_url_is_wrong(tmp_path, predictor):
    settings = load_settings(
        home=tmp_path,
        db_url="postgresql+psycopg://secretuser@127.0.0.1:1/secretdb",
    )
    app, client = _client(settings, predictor)
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.get_json()
    assert body["failed"] == ["database"]
    assert body["checks"]["database"]["detail"].startswith("unreachable")
    # The predictions endpoint does not need the database.
    assert client.post("/v1/predictions", json={"coreCount": 1}).status_code == 200
    # A database endpoint says it cannot answer, but not where the database is.
    read = client.get("/v1/tasks/1/prediction")
    assert read.status_code == 503
    assert read.headers["Retry-After"] == "5"
    for text in (response.get_data(as_text=True), read.get_data(as_text=True)):
        for secret in ("secretuser", "secretdb", "127.0.0.1", ":1/", "psycopg"):
            assert secret not in text


def test_readyz_names_missing_tables_then_recovers_without_restart(settings, predictor):
    """An empty database is not 'ok'; once its tables exist, readiness follows."""
    from panda_predictor.db.migrations import init_database

    engine = make_engine(settings)
    with engine.connect():  # an empty database: a SQLite file or a PG schema
        pass
    app, client = _client(settings, predictor)
    try:
        response = client.get("/readyz")
        assert response.status_code == 503
        body = response.get_json()
        assert body["failed"] == ["database"]
        assert body["checks"]["database"]["detail"] == (
            "missing tables: jedi_tasks, jedi_datasets, jobsarchived4, "
            "pp_prediction_audit, pp_schema_version"
        )
        init_database(engine, settings, with_panda_tables=True)
        response = client.get("/readyz")
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["status"] == "ready"
    finally:
        engine.dispose()
        app.extensions["panda_predictor"].close()


def test_a_missing_sqlite_file_is_not_recreated_and_is_used_once_back(
    fresh_sqlite, predictor
):
    """Moving the database away gives 503; putting it back serves again."""
    path = fresh_sqlite.home / "panda.sqlite"
    task_id = _defined_ids(fresh_sqlite)[0]
    app, client = _client(fresh_sqlite, predictor)
    try:
        assert client.get("/readyz").status_code == 200
        path.rename(path.with_suffix(".away"))
        assert client.get("/readyz").status_code == 503
        assert client.get(f"/v1/tasks/{task_id}/prediction").status_code == 503
        assert not path.exists()  # not recreated empty
        path.with_suffix(".away").rename(path)
        assert client.get("/readyz").status_code == 200
        assert client.get(f"/v1/tasks/{task_id}/prediction").status_code == 404
    finally:
        app.extensions["panda_predictor"].close()


def test_a_replaced_sqlite_file_is_reopened(fresh_sqlite, predictor, tmp_path):
    """An engine on a file since replaced is remade, not left on the old inode."""
    import sqlite3

    path = fresh_sqlite.home / "panda.sqlite"
    app, client = _client(fresh_sqlite, predictor)
    try:
        assert client.get("/readyz").status_code == 200  # the pool holds the file
        sqlite3.connect(tmp_path / "empty.sqlite").close()
        (tmp_path / "empty.sqlite").replace(path)  # a new file at the same path
        body = client.get("/readyz").get_json()
        assert body["failed"] == ["database"]
        assert body["checks"]["database"]["detail"].startswith("missing tables")
    finally:
        app.extensions["panda_predictor"].close()


def test_readyz_is_503_naming_the_model_when_none_loads(fresh_sqlite):
    def broken():
        raise RuntimeError("registry down and cache empty")

    app = create_app(fresh_sqlite, predictor_loader=broken)
    client = app.test_client()
    response = client.get("/readyz")
    app.extensions["panda_predictor"].close()
    assert response.status_code == 503
    assert response.get_json()["failed"] == ["model"]


def test_history_refresher_feeds_history_features(fresh_sqlite, predictor):
    app = create_app(fresh_sqlite, lambda: predictor, history_refresh_seconds=3600)
    state = app.extensions["panda_predictor"]
    try:
        state.history.stop()  # the first read has happened or is under way
        state.history.refresh()
        assert state.history.error is None
        response = app.test_client().post(
            "/v1/predictions", json={"transPath": "Sim_tf.py", "coreCount": 8}
        )
        assert response.get_json()["history_features"] is True
    finally:
        state.close()
