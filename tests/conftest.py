"""Shared fixtures: seeded randomness, real databases (SQLite and PostgreSQL), settings."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

# Every test process that may import MLflow must have telemetry off before it does.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
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


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_target(request: pytest.FixtureRequest, tmp_path) -> tuple[str, str | None]:
    """Return ``(url, schema)`` of an empty database: SQLite file or PostgreSQL schema."""
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
