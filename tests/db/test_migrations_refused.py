"""A refused or failed `panda-predictor db init` leaves nothing behind (PostgreSQL)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from conftest import POSTGRES_URL

from panda_predictor.cli import main
from panda_predictor.db.engine import DatabaseError, make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.settings import load_settings

pytestmark = pytest.mark.postgres


def _schemas() -> set[str]:
    engine = sa.create_engine(POSTGRES_URL)
    try:
        with engine.connect() as conn:
            return set(sa.inspect(conn).get_schema_names())
    finally:
        engine.dispose()


def test_init_with_a_wrong_schema_name_creates_nothing(tmp_path):
    wrong = f"pp_wrong_{uuid.uuid4().hex[:10]}"
    runner = CliRunner(
        env={
            "PANDA_PREDICTOR_DB_URL": POSTGRES_URL,
            "PANDA_PREDICTOR_DB_SCHEMA": wrong,
            "PANDA_PREDICTOR_HOME": str(tmp_path),
            "PANDA_PREDICTOR_CONFIG": "",
        }
    )

    result = runner.invoke(main, ["db", "init"])

    assert result.exit_code != 0
    assert f"table {wrong}.jedi_tasks is missing" in result.output
    assert wrong not in _schemas()


def test_init_failing_in_a_patch_drops_the_schemas_it_created(tmp_path):
    schema = f"pp_fail_{uuid.uuid4().hex[:10]}"
    settings = load_settings(home=tmp_path, db_url=POSTGRES_URL, db_schema=schema)
    # A copy of sql/ whose second plugin patch fails after the first one applied.
    root = Path(__file__).resolve().parents[2] / "sql"
    broken = tmp_path / "sql"
    for series in ("plugin", "panda"):
        target = broken / "postgresql" / series
        target.mkdir(parents=True)
        for patch in sorted((root / "postgresql" / series).glob("*.sql")):
            (target / patch.name).write_text(patch.read_text())
    (broken / "postgresql" / "plugin" / "0002_outcomes.sql").write_text(
        "/* broken */\nSELECT no_such_column FROM no_such_table;\n"
    )
    engine = make_engine(settings)
    try:
        with pytest.raises(DatabaseError, match="no_such_table"):
            init_database(engine, settings, with_panda_tables=True, sql_root=broken)
    finally:
        engine.dispose()

    assert schema not in _schemas()
