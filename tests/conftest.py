"""Shared fixtures: seeded randomness, real databases (SQLite, PostgreSQL), settings."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

# Every test process that may import MLflow must have telemetry off before it does.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
# The developer's own configuration must not leak into the tests.
for _name in [n for n in os.environ if n.startswith("PANDA_PREDICTOR_")] + [
    "MLFLOW_TRACKING_URI",
    "MLFLOW_REGISTRY_URI",
]:
    if _name != "PANDA_PREDICTOR_TEST_PG_URL":
        os.environ.pop(_name, None)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: The PostgreSQL server this machine kind starts before each session (trust auth).
POSTGRES_URL = os.environ.get(
    "PANDA_PREDICTOR_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)

SEED = 20261129


@pytest.fixture
def seed() -> int:
    """Return the one seed every random thing in a test derives from."""
    return SEED


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """Create a fresh PostgreSQL schema for one test and drop it afterwards."""
    import sqlalchemy as sa

    name = f"pp_test_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {name}"))
    try:
        yield name
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {name} CASCADE"))
        engine.dispose()


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def db_target(request: pytest.FixtureRequest, tmp_path) -> tuple[str, str | None]:
    """Return ``(url, schema)`` of an empty database: a SQLite file or a PG schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'panda.sqlite'}", None
    return POSTGRES_URL, request.getfixturevalue("pg_schema")


@pytest.fixture
def settings(tmp_path, db_target):
    """Return settings pointing at the test database and a temp MLflow store."""
    from panda_predictor.settings import load_settings

    url, schema = db_target
    return load_settings(
        home=tmp_path,
        db_url=url,
        db_schema=schema if schema is not None else "",
        mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
    )


@pytest.fixture(scope="session")
def empty_mlflow_store(tmp_path_factory):
    """Return an empty MLflow SQLite store, built once: its migrations take seconds."""
    from model_registry.tracking import mlflow_client
    from panda_predictor.settings import load_settings

    folder = tmp_path_factory.mktemp("mlflow-template")
    store = folder / "mlflow.db"
    mlflow_client(
        load_settings(home=folder, mlflow_tracking_uri=f"sqlite:///{store}")
    ).search_registered_models()
    return store


@pytest.fixture
def reg_settings(tmp_path, empty_mlflow_store):
    """Return settings on a fresh MLflow store for this test (copy of the empty one)."""
    import shutil

    from panda_predictor.settings import load_settings

    shutil.copyfile(empty_mlflow_store, tmp_path / "mlflow.db")
    return load_settings(
        home=tmp_path / "home", mlflow_tracking_uri=f"sqlite:///{tmp_path}/mlflow.db"
    )


@pytest.fixture
def engine(settings):
    """Return an engine on the empty test database, disposed afterwards."""
    from panda_predictor.db.engine import make_engine

    created = make_engine(settings)
    try:
        yield created
    finally:
        created.dispose()


@pytest.fixture
def db(engine, settings):
    """Return an engine on a test database built from sql/ with PanDA's tables."""
    from panda_predictor.db.migrations import init_database

    init_database(engine, settings, with_panda_tables=True)
    return engine


@pytest.fixture
def panda_ddl(tmp_path):
    """Return an engine and settings on a fresh database built from PanDA's own DDL.

    ``build.sh`` of ``/work/shared/data/panda-schema`` (schema doma_panda) plus the
    plugin's tables (tests/message_parts.py); the database is dropped afterwards.
    """
    from message_parts import build_panda_database, drop_database

    from panda_predictor.db.engine import make_engine

    name, settings = build_panda_database(tmp_path)
    engine = make_engine(settings)
    try:
        yield engine, settings
    finally:
        engine.dispose()
        drop_database(name)


@pytest.fixture(scope="session")
def simulated_sqlite(tmp_path_factory):
    """Return settings of a SQLite PanDA database holding a small simulated history.

    2,500 finished tasks and 30 newly defined ones (seeded). Session-wide and
    read-only: tests that write copy it first with :func:`copy_sqlite`.
    """
    from panda_predictor.db.engine import make_engine
    from panda_predictor.db.migrations import init_database
    from panda_predictor.settings import load_settings
    from pipelines.simulation import SimulationConfig, simulate_history
    from pipelines.simulation.history_writer import load_history

    home = tmp_path_factory.mktemp("simulated")
    settings = load_settings(
        home=home, mlflow_tracking_uri=f"sqlite:///{home / 'mlflow.db'}"
    )
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    config = SimulationConfig(n_tasks=2500, n_defined=30, seed=SEED)
    load_history(engine, settings, simulate_history(config, progress=False))
    engine.dispose()
    return settings


@pytest.fixture(scope="session")
def labelled_history(simulated_sqlite):
    """Return the labelled history of the session's simulated database."""
    from panda_predictor.db.engine import make_engine
    from pipelines.training.dataset import read_labelled_history

    engine = make_engine(simulated_sqlite)
    try:
        return read_labelled_history(engine, simulated_sqlite, progress=False)
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def trained_bundle_dir(tmp_path_factory, labelled_history):
    """Return the folder of a small XGBoost bundle trained on the simulated history."""
    from panda_predictor.bins_file import load_bins
    from panda_predictor.serving.bundle import save_bundle
    from pipelines.training.config import TrainingConfig
    from pipelines.training.train import train

    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 60})
    result = train(labelled_history, load_bins(), config)
    return save_bundle(result.bundle, tmp_path_factory.mktemp("bundle") / "bundle")


@pytest.fixture
def fresh_sqlite(simulated_sqlite, tmp_path):
    """Return settings of a private, writable copy of the simulated SQLite database."""
    import shutil

    from panda_predictor.settings import load_settings

    shutil.copy(simulated_sqlite.home / "panda.sqlite", tmp_path / "panda.sqlite")
    return load_settings(
        home=tmp_path, mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}"
    )


@pytest.fixture(autouse=True)
def _no_mlflow_uri_from_earlier_tests(monkeypatch):
    """Drop the tracking URI an earlier test's MLflow run left in the environment.

    ``mlflow.set_tracking_uri`` also exports ``MLFLOW_TRACKING_URI``, and our settings
    honour that variable, so without this a test would see another test's store.
    """
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)


@pytest.fixture(scope="session")
def spark():
    """Return one local Spark session (2 threads) shared by every Spark test.

    Starting the JVM takes seconds; the time goes into the first Spark test's
    setup, which ``pytest --durations`` shows apart from the tests' own time.
    """
    from pipelines.labels.spark.session import spark_session

    session = spark_session("local[2]", {"spark.driver.memory": "1g"})
    try:
        yield session
    finally:
        session.stop()
