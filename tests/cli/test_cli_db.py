"""The ``panda-predictor db`` commands through click's CliRunner, on both databases."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from panda_predictor.cli import main
from panda_predictor.db.engine import DatabaseError, make_engine
from panda_predictor.db.migrations import expected_version, schema_version
from panda_predictor.settings import load_settings


@pytest.fixture
def run(db_target, tmp_path):
    """Return a function running ``panda-predictor db ...`` on the test database."""
    url, schema = db_target
    env = {
        "PANDA_PREDICTOR_DB_URL": url,
        "PANDA_PREDICTOR_DB_SCHEMA": schema or "",
        "PANDA_PREDICTOR_HOME": str(tmp_path),
        "PANDA_PREDICTOR_CONFIG": "",
    }
    runner = CliRunner(env=env)
    return lambda *args: runner.invoke(main, ["db", *args])


def test_init_upgrade_check(run, settings):
    first = run("init", "--with-panda-tables")
    assert first.exit_code == 0, first.output
    plugin = expected_version("sqlite", "plugin")
    panda = expected_version("sqlite", "panda")
    assert f"plugin at version {plugin}, panda at version {panda}" in first.output
    again = run("init", "--with-panda-tables")
    assert again.exit_code == 0, again.output
    upgraded = run("upgrade")
    assert upgraded.exit_code == 0, upgraded.output
    assert f"plugin: version {plugin} (already current)" in upgraded.output
    checked = run("check")
    assert checked.exit_code == 0, checked.output
    assert "is ready" in checked.output
    engine = make_engine(settings)
    try:
        assert schema_version(engine, settings) == plugin
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param(
            ("init",), "jedi_tasks is missing", id="init-without-panda-tables"
        ),
        pytest.param(("check",), "jedi_tasks is missing", id="check-empty"),
        pytest.param(
            ("upgrade",), "Run 'panda-predictor db init' first", id="upgrade-empty"
        ),
    ],
)
def test_errors_are_one_line(run, args, match):
    result = run(*args)
    assert result.exit_code != 0
    assert match in result.output
    assert result.output.strip().startswith("Error:")
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("url", "match"),
    [
        pytest.param("not a url", "is malformed", id="malformed"),
        pytest.param(
            "nosuchdb://x/y", "unknown dialect or driver", id="unknown-dialect"
        ),
        pytest.param(
            "postgresql+psycopg://postgres@127.0.0.1:1/test",
            "Cannot reach",
            id="unreachable",
        ),
    ],
)
def test_wrong_url_gives_one_clear_line(tmp_path, url, match):
    runner = CliRunner(
        env={"PANDA_PREDICTOR_DB_URL": url, "PANDA_PREDICTOR_HOME": str(tmp_path)}
    )
    result = runner.invoke(main, ["db", "check"])
    assert result.exit_code == 1
    assert match in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not isinstance(result.exception, DatabaseError)


@pytest.mark.parametrize(
    ("url", "match"),
    [
        pytest.param(
            "not a url", r"malformed\. Set PANDA_PREDICTOR_DB_URL", id="malformed"
        ),
        pytest.param(
            "nosuchdb://x/y", r"Use sqlite, postgresql\+psycopg", id="dialect"
        ),
        pytest.param(
            "mysql+nosuchdriver://x/y", "unknown dialect or driver", id="driver"
        ),
    ],
)
def test_make_engine_errors(tmp_path, url, match):
    with pytest.raises(DatabaseError, match=match):
        make_engine(load_settings(home=tmp_path, db_url=url))


def test_password_never_shown(tmp_path):
    settings = load_settings(
        home=tmp_path, db_url="postgresql+psycopg://u:secret@127.0.0.1:1/test"
    )
    engine = make_engine(settings)
    try:
        with pytest.raises(DatabaseError, match="Cannot reach") as caught:
            schema_version(engine, settings)
    finally:
        engine.dispose()
    assert "secret" not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.parametrize("command", ["init", "upgrade", "check"])
def test_help_names_the_rights_needed(command):
    result = CliRunner().invoke(main, ["db", command, "--help"])
    assert result.exit_code == 0
    assert "Needs" in result.output


def test_default_sqlite_file_is_created_under_home(tmp_path):
    settings = load_settings(home=tmp_path / "new", db_url=None)
    engine = make_engine(settings)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()
    assert (tmp_path / "new" / "panda.sqlite").is_file()


def test_the_group_runs_on_the_settings_it_is_given(settings):
    from panda_predictor.cli.db import db
    from panda_predictor.db.engine import safe_url

    result = CliRunner().invoke(db, ["init", "--with-panda-tables"], obj=settings)

    assert result.exit_code == 0, result.output
    where = safe_url(settings.database_url())
    assert result.output.startswith(f"Database {where} initialised: plugin at version")
