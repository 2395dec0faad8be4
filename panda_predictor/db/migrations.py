"""Create, upgrade and check the database from the numbered patches in ``sql/``.

Two patch series per dialect: ``sql/<dialect>/plugin/NNNN_*.sql`` (the plugin's own
tables, always applied) and ``sql/<dialect>/panda/NNNN_*.sql`` (PanDA's tables, only
for test databases). Each patch ends by writing its version row in
``pp_schema_version`` (component ``plugin`` or ``panda``), runs in one transaction
where the dialect allows DDL in transactions (SQLite, PostgreSQL), and is applied
only if its number is above the recorded version, so init and upgrade are idempotent.
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from panda_predictor.db.engine import (
    DatabaseError,
    dialect_of,
    get_panda_tables,
    get_plugin_tables,
    translate_errors,
)
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)


def _find_sql_root() -> Path:
    """Return the ``sql/`` folder: the source tree's, else the installed copy."""
    source = Path(__file__).resolve().parents[2] / "sql"
    if source.is_dir():
        return source
    # A regular (non-editable) install puts sql/ under <prefix>/share (setup.cfg).
    return Path(sys.prefix) / "share" / "panda-predictor" / "sql"


#: The numbered DDL patches, per dialect and series.
SQL_ROOT = _find_sql_root()
SERIES = ("plugin", "panda")
DIALECTS = ("sqlite", "postgresql", "oracle")

_PATCH_NAME = re.compile(r"^(\d{4})_(\w+)\.sql$")
_STATEMENT_END = re.compile(r";[ \t]*$", re.MULTILINE)

#: PanDA tables read where they exist (the job archive, in a schema of its own, and
#: the dataset files: without them the labels take a job's own NEVENTS and bytes).
OPTIONAL_PANDA_TABLES = ("jobsarchived", "jedi_dataset_contents")
#: PanDA columns the plugin writes; the rest it only reads.
WRITTEN_COLUMNS = {
    "jedi_tasks": (
        "splitrule",
        "ramcount",
        "ramunit",
        "cputime",
        "cputimeunit",
        "iointensity",
        "iointensityunit",
        "walltime",
        "walltimeunit",
        "resource_type",
        # the early re-measurement (db/early_remeasure.py), as PanDA asks for one
        "modificationtime",
    ),
    "jedi_datasets": ("nfilestobeused", "modificationtime"),
}


@dataclass(frozen=True)
class Patch:
    """One numbered SQL patch file of a series."""

    series: str
    version: int
    name: str
    path: Path


def list_patches(
    dialect: str, series: str, sql_root: Path | None = None
) -> list[Patch]:
    """Return the patches of ``series`` for ``dialect`` in the order they apply.

    Parameters
    ----------
    dialect:
        ``sqlite``, ``postgresql`` or ``oracle``.
    series:
        ``plugin`` or ``panda``.
    sql_root:
        Folder holding ``<dialect>/<series>/``; default: this tree's ``sql/``.
    """
    if dialect not in DIALECTS:
        raise DatabaseError(
            f"The database dialect must be one of {list(DIALECTS)}. Got {dialect!r} "
            f"instead; set PANDA_PREDICTOR_DB_URL to a supported database."
        )
    folder = (sql_root or SQL_ROOT) / dialect / series
    if not folder.is_dir():
        raise DatabaseError(
            f"The SQL patch folder {str(folder)!r} does not exist. Reinstall "
            f"panda-predictor from its source tree, which ships sql/."
        )
    patches = []
    for path in sorted(folder.glob("*.sql")):
        match = _PATCH_NAME.match(path.name)
        if match:
            patches.append(Patch(series, int(match[1]), match[2], path))
    return patches


def expected_version(
    dialect: str, series: str = "plugin", sql_root: Path | None = None
) -> int:
    """Return the version the newest patch of ``series`` brings the schema to."""
    patches = list_patches(dialect, series, sql_root)
    return patches[-1].version if patches else 0


def split_statements(text: str) -> list[str]:
    """Return the statements of a patch file: split at line-final ``;``, no comments.

    Full-line ``--`` comments are dropped; the ``/* sql/... */`` tag of each statement
    stays so a DBA sees where the statement comes from.
    """
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    parts = _STATEMENT_END.split("\n".join(lines))
    return [part.strip() for part in parts if part.strip()]


def render_statement(statement: str, settings: Settings, dialect: str) -> str:
    """Return ``statement`` with ``{schema}`` and ``{plugin_schema}`` filled in."""
    schema = settings.schema_for(dialect)
    plugin_schema = settings.plugin_schema_for(dialect)
    return statement.replace("{schema}", f"{schema}." if schema else "").replace(
        "{plugin_schema}", f"{plugin_schema}." if plugin_schema else ""
    )


def schema_version(
    engine: Engine, settings: Settings, component: str = "plugin"
) -> int | None:
    """Return the recorded version of ``component``, or None if never initialised."""
    with translate_errors(engine), engine.connect() as conn:
        table = get_plugin_tables(settings, conn).schema_version
        if not sa.inspect(conn).has_table(table.name, schema=table.schema):
            return None
        query = (
            sa.select(table.c.version)
            .where(table.c.component == sa.bindparam("component"))
            .prefix_with("/* migrations.schema_version */", dialect="*")
        )
        version = conn.execute(query, {"component": component}).scalar()
    return None if version is None else int(version)


def _apply_series(
    engine: Engine, settings: Settings, series: str, sql_root: Path | None
) -> tuple[int, int]:
    """Apply the patches of ``series`` above its recorded version; return (old, new)."""
    dialect = dialect_of(engine)
    current = schema_version(engine, settings, series) or 0
    new = current
    for patch in list_patches(dialect, series, sql_root):
        if patch.version <= current:
            continue
        statements = split_statements(patch.path.read_text())
        log.info(
            "Applying %s patch %04d_%s (%d statements)",
            series,
            patch.version,
            patch.name,
            len(statements),
        )
        with translate_errors(engine), engine.begin() as conn:
            for statement in statements:
                conn.exec_driver_sql(render_statement(statement, settings, dialect))
        new = patch.version
    return current, new


def _ensure_schemas(
    engine: Engine, settings: Settings, with_panda_tables: bool
) -> list[str]:
    """Create missing PostgreSQL schemas (needs CREATE on the database).

    Returns the schemas created, so a failed init can drop them again.
    """
    if dialect_of(engine) != "postgresql":
        return []
    wanted = {settings.plugin_schema_for("postgresql")}
    if with_panda_tables:
        wanted.add(settings.schema_for("postgresql"))
    with translate_errors(engine), engine.begin() as conn:
        existing = set(sa.inspect(conn).get_schema_names())
        missing = sorted(s for s in wanted if s and s not in existing)
        for schema in missing:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", schema):
                raise DatabaseError(
                    f"The schema name must be a plain SQL identifier. Got {schema!r} "
                    f"instead; fix PANDA_PREDICTOR_DB_SCHEMA."
                )
        for schema in missing:
            log.info("Creating schema %s", schema)
            conn.exec_driver_sql(
                f"/* migrations.init_database */ CREATE SCHEMA {schema}"
            )
    return missing


def _drop_schemas(engine: Engine, schemas: list[str]) -> None:
    """Drop the schemas a failed :func:`init_database` created, with what it put in."""
    if not schemas:
        return
    with translate_errors(engine), engine.begin() as conn:
        for schema in schemas:
            log.info("Dropping schema %s again: the init failed", schema)
            conn.exec_driver_sql(
                f"/* migrations.init_database */ DROP SCHEMA {schema} CASCADE"
            )


def init_database(
    engine: Engine,
    settings: Settings,
    with_panda_tables: bool = False,
    sql_root: Path | None = None,
) -> dict[str, int]:
    """Create the plugin's tables (and PanDA's, for a test database); safe to repeat.

    Without ``with_panda_tables`` the PanDA tables must already exist with every
    column the plugin uses (checked first, nothing created otherwise). A refused
    or failed init leaves nothing behind: the schemas it created are dropped again
    (each patch is its own transaction on SQLite and PostgreSQL).

    Parameters
    ----------
    engine:
        Engine of the database.
    settings:
        Settings naming the PanDA and plugin schemas.
    with_panda_tables:
        Also create JEDI_TASKS, JEDI_DATASETS and JOBSARCHIVED4 (test databases only).
    sql_root:
        Folder of the SQL patches; default: this tree's ``sql/``.

    Returns
    -------
    The schema version per series after the run.
    """
    if not with_panda_tables:
        problems = check_panda_columns(engine, settings)
        if problems:
            raise DatabaseError(
                "The PanDA tables do not match what panda-predictor needs: "
                + "; ".join(problems)
                + ". Fix the PanDA schema setting, or use --with-panda-tables on a "
                "test database."
            )
    created = _ensure_schemas(engine, settings, with_panda_tables)
    try:
        versions = {"plugin": _apply_series(engine, settings, "plugin", sql_root)[1]}
        if with_panda_tables:
            versions["panda"] = _apply_series(engine, settings, "panda", sql_root)[1]
    except BaseException:
        _drop_schemas(engine, created)
        raise
    return versions


def upgrade_database(
    engine: Engine, settings: Settings, sql_root: Path | None = None
) -> dict[str, tuple[int, int]]:
    """Apply the pending patches of every initialised series; return (old, new) each."""
    if schema_version(engine, settings, "plugin") is None:
        raise DatabaseError(
            "The database has no panda-predictor tables yet. Run "
            "'panda-predictor db init' first."
        )
    changes = {"plugin": _apply_series(engine, settings, "plugin", sql_root)}
    if schema_version(engine, settings, "panda") is not None:
        changes["panda"] = _apply_series(engine, settings, "panda", sql_root)
    return changes


def require_current_schema(
    engine: Engine, settings: Settings, sql_root: Path | None = None
) -> int:
    """Raise :class:`DatabaseError` unless the plugin schema is at this version."""
    expected = expected_version(dialect_of(engine), "plugin", sql_root)
    found = schema_version(engine, settings, "plugin")
    if found is None:
        raise DatabaseError(
            f"The database has no panda-predictor tables (expected schema version "
            f"{expected}). Run 'panda-predictor db init'."
        )
    if found < expected:
        raise DatabaseError(
            f"The database schema is at version {found}, this panda-predictor needs "
            f"version {expected}. Run 'panda-predictor db upgrade'."
        )
    if found > expected:
        raise DatabaseError(
            f"The database schema is at version {found}, newer than version "
            f"{expected} this panda-predictor knows. Upgrade panda-predictor."
        )
    return found


def _kind(column_type: sa.types.TypeEngine) -> str:
    """Return the family of a column type: integer, number, text, datetime or other."""
    if isinstance(column_type, sa.DateTime | sa.Date):
        return "datetime"
    if isinstance(column_type, sa.Integer):
        return "integer"
    if isinstance(column_type, sa.Float):
        return "number"
    if isinstance(column_type, sa.Numeric):
        return "integer" if not column_type.scale else "number"
    if isinstance(column_type, sa.String):
        return "text"
    return "other"


def _compatible(
    expected: sa.types.TypeEngine, found: sa.types.TypeEngine, written: bool
) -> bool:
    want, have = _kind(expected), _kind(found)
    if want == "integer":
        return have in ("integer", "number")
    if want != have:
        return False
    if want == "text" and written:
        need = getattr(expected, "length", None)
        length = getattr(found, "length", None)
        return need is None or length is None or length >= need
    return True


def check_panda_columns(engine: Engine, settings: Settings) -> list[str]:
    """Return what is missing or incompatible in the PanDA columns the plugin uses.

    Reads the database's own description (SQLAlchemy's inspector), so it needs only
    the right to see PanDA's tables; an empty list means all is in place.
    """
    problems: list[str] = []
    with translate_errors(engine), engine.connect() as conn:
        inspector = sa.inspect(conn)
        for table in get_panda_tables(settings, conn).__dict__.values():
            label = f"{table.schema}.{table.name}" if table.schema else table.name
            if not inspector.has_table(table.name, schema=table.schema):
                if table.name not in OPTIONAL_PANDA_TABLES:
                    problems.append(f"table {label} is missing")
                continue
            found = {
                col["name"].lower(): col["type"]
                for col in inspector.get_columns(table.name, schema=table.schema)
            }
            written = WRITTEN_COLUMNS.get(table.name, ())
            for column in table.columns:
                if column.name not in found:
                    problems.append(f"column {label}.{column.name} is missing")
                elif not _compatible(
                    column.type, found[column.name], column.name in written
                ):
                    problems.append(
                        f"column {label}.{column.name} has type {found[column.name]}, "
                        f"expected {column.type.compile(dialect=conn.dialect)}"
                    )
    return problems
