"""Building, upgrading and checking the database from sql/, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from panda_predictor.db.engine import DatabaseError, dialect_of, get_plugin_tables
from panda_predictor.db.migrations import (
    SQL_ROOT,
    check_panda_columns,
    expected_version,
    init_database,
    list_patches,
    require_current_schema,
    schema_version,
    split_statements,
    upgrade_database,
)
from panda_predictor.db.tables import panda_tables

#: The plugin series' current version (every dialect has the same patches) and the
#: version of a test patch added on top of it.
PLUGIN = expected_version("sqlite", "plugin")
NEXT = PLUGIN + 1
#: The PanDA (test-table) series' current version.
PANDA = expected_version("sqlite", "panda")


def _has_table(bind, name, schema):
    with bind.connect() as conn:
        return sa.inspect(conn).has_table(name, schema=schema)


def _create_panda_tables_as_panda_would(bind, settings, drop=None, retype=None):
    """Create PanDA's tables from their description, standing in for PanDA's DDL."""
    source = panda_tables(settings.schema_for(dialect_of(bind)))
    metadata = sa.MetaData(schema=source.jedi_tasks.schema)
    for table in source.__dict__.values():  # every PanDA table the plugin uses
        columns = []
        for column in table.columns:
            if column.name == drop:
                continue
            kind = retype if column.name == "cputime" and retype else column.type
            columns.append(sa.Column(column.name, kind, primary_key=column.primary_key))
        sa.Table(table.name, metadata, *columns)
    metadata.create_all(bind)


def test_init_with_panda_tables_twice(engine, settings):
    schema = settings.schema_for(dialect_of(engine))
    assert schema_version(engine, settings) is None
    first = init_database(engine, settings, with_panda_tables=True)
    second = init_database(engine, settings, with_panda_tables=True)
    assert first == second == {"plugin": PLUGIN, "panda": PANDA}
    for name in ("jedi_tasks", "jedi_datasets", "jobsarchived4", "pp_prediction_audit"):
        assert _has_table(engine, name, schema)
    assert schema_version(engine, settings, "panda") == PANDA
    assert require_current_schema(engine, settings) == PLUGIN
    assert check_panda_columns(engine, settings) == []


def test_init_on_existing_panda_tables_creates_only_plugin_tables(engine, settings):
    _create_panda_tables_as_panda_would(engine, settings)
    assert init_database(engine, settings) == {"plugin": PLUGIN}
    assert init_database(engine, settings) == {"plugin": PLUGIN}
    audit = get_plugin_tables(settings, engine).audit
    assert _has_table(engine, audit.name, audit.schema)
    assert schema_version(engine, settings, "panda") is None


def test_init_without_panda_tables_creates_nothing(engine, settings):
    with pytest.raises(
        DatabaseError, match=r"jedi_tasks is missing.*--with-panda-tables"
    ):
        init_database(engine, settings)
    assert schema_version(engine, settings) is None


@pytest.mark.parametrize(
    ("drop", "retype", "expected"),
    [
        pytest.param(
            "ramunit",
            None,
            r"column (\w+\.)?jedi_tasks\.ramunit is missing",
            id="dropped",
        ),
        pytest.param(
            None,
            sa.String(10),
            r"column (\w+\.)?jedi_tasks\.cputime has type",
            id="retyped",
        ),
    ],
)
def test_check_panda_columns_names_the_problem(
    engine, settings, drop, retype, expected
):
    _create_panda_tables_as_panda_would(engine, settings, drop=drop, retype=retype)
    problems = check_panda_columns(engine, settings)
    assert len(problems) == 1
    assert re.match(expected, problems[0])
    with pytest.raises(DatabaseError, match=expected):
        init_database(engine, settings)


def _tree_with_patch(tmp_path: Path, dialect: str, body: str) -> Path:
    """Copy sql/ and add the next plugin patch (``PLUGIN + 1``) for ``dialect``."""
    root = tmp_path / "sql"
    shutil.copytree(SQL_ROOT, root)
    (root / dialect / "plugin" / f"{NEXT:04d}_test_outcome.sql").write_text(body)
    return root


_VERSION_NEXT = f"""
/* sql/test/next */
INSERT INTO {{plugin_schema}}pp_schema_version (component, version, applied_at)
VALUES ('plugin', {NEXT}, CURRENT_TIMESTAMP)
ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version;
"""


def test_upgrade_from_an_older_version(db, settings, tmp_path):
    dialect = dialect_of(db)
    root = _tree_with_patch(
        tmp_path,
        dialect,
        "/* sql/test/next */\nCREATE TABLE {plugin_schema}pp_test_outcome (\n"
        "    jeditaskid BIGINT PRIMARY KEY\n);\n" + _VERSION_NEXT,
    )
    assert expected_version(dialect, "plugin", root) == NEXT
    with pytest.raises(
        DatabaseError, match=rf"version {PLUGIN}, .*needs version {NEXT}.*db upgrade"
    ):
        require_current_schema(db, settings, sql_root=root)
    assert upgrade_database(db, settings, sql_root=root) == {
        "plugin": (PLUGIN, NEXT),
        "panda": (PANDA, PANDA),
    }
    assert require_current_schema(db, settings, sql_root=root) == NEXT
    assert _has_table(db, "pp_test_outcome", settings.plugin_schema_for(dialect))
    assert upgrade_database(db, settings, sql_root=root)["plugin"] == (NEXT, NEXT)
    with pytest.raises(
        DatabaseError, match=rf"version {NEXT}, newer than version {PLUGIN}"
    ):
        require_current_schema(db, settings)


def test_failed_patch_rolls_back_as_a_whole(db, settings, tmp_path):
    dialect = dialect_of(db)
    root = _tree_with_patch(
        tmp_path,
        dialect,
        "/* sql/test/next */\nCREATE TABLE {plugin_schema}pp_half_done (x INTEGER);\n"
        "/* sql/test/next */\nINSERT INTO {plugin_schema}no_such_table VALUES (1);\n"
        + _VERSION_NEXT,
    )
    with pytest.raises(DatabaseError, match="no_such_table"):
        upgrade_database(db, settings, sql_root=root)
    assert schema_version(db, settings) == PLUGIN
    assert not _has_table(db, "pp_half_done", settings.plugin_schema_for(dialect))


def test_upgrade_needs_init_first(engine, settings):
    with pytest.raises(DatabaseError, match="db init"):
        upgrade_database(engine, settings)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "oracle"])
def test_patch_series_are_parallel_and_tagged(dialect):
    for series in ("plugin", "panda"):
        patches = list_patches(dialect, series)
        expected = PLUGIN if series == "plugin" else PANDA
        assert [p.version for p in patches] == list(range(1, expected + 1))
        for patch in patches:
            tag = f"/* {patch.path.relative_to(SQL_ROOT.parent).as_posix()} */"
            statements = split_statements(patch.path.read_text())
            assert statements, patch.path
            assert all(s.startswith(tag) for s in statements), patch.path
            assert "pp_schema_version" in statements[-1]
            assert not any(s.rstrip().endswith(";") for s in statements)


def test_unknown_dialect_is_refused():
    with pytest.raises(DatabaseError, match=r"must be one of .*Got 'mysql'"):
        list_patches("mysql", "plugin")
