"""Build the SQLAlchemy engine and turn database failures into one clear line.

One URL setting serves every dialect (``sqlite``, ``postgresql+psycopg``,
``oracle+oracledb``); the rest of the code only sees an :class:`~sqlalchemy.Engine`
and :class:`DatabaseError`, whose message names the problem and the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from panda_predictor.db.tables import (
    PandaTables,
    PluginTables,
    panda_tables,
    plugin_tables,
)
from panda_predictor.errors import UserFixableError
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

URL_ENV = "PANDA_PREDICTOR_DB_URL"
URL_EXAMPLES = (
    "sqlite:///var/panda.sqlite, postgresql+psycopg://user@host:5432/panda or "
    "oracle+oracledb://user@host:1521/?service_name=PANDA"
)


class DatabaseError(UserFixableError, RuntimeError):
    """A database problem, described in one line that names the cause and the fix.

    A :class:`~panda_predictor.errors.UserFixableError` (the command line shows it as
    one line) but not a ``ValueError``: code that catches bad values must not take an
    unreachable database for one.
    """


def safe_url(url: URL | str) -> str:
    """Return ``url`` as text with any password masked, fit for logs and errors."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except ArgumentError:
        return "<malformed URL>"
    return parsed.render_as_string(hide_password=True)


def make_engine(settings: Settings) -> Engine:
    """Create the engine for ``settings.database_url()``, checking the URL and driver.

    The connection is opened lazily; unreachable servers are reported by the first
    statement (see :func:`translate_errors`). SQLite gets real transactions (so DDL
    patches and write-backs roll back as a whole) and its parent folder is created.

    Parameters
    ----------
    settings:
        The settings; only ``db_url`` (or ``home`` for the SQLite default) is used.
    """
    raw = settings.database_url()
    try:
        url = make_url(raw)
    except ArgumentError:
        raise DatabaseError(
            f"The database URL {raw!r} is malformed. Set {URL_ENV} to a SQLAlchemy "
            f"URL such as {URL_EXAMPLES}."
        ) from None
    options: dict[str, Any] = {"pool_pre_ping": True}
    backend = url.get_backend_name()
    if backend == "postgresql":
        options["connect_args"] = {"connect_timeout": 10}
    try:
        engine = sa.create_engine(url, **options)
    except NoSuchModuleError:
        raise DatabaseError(
            f"The database URL {safe_url(url)!r} names an unknown dialect or driver "
            f"{url.drivername!r}. Use sqlite, postgresql+psycopg or oracle+oracledb."
        ) from None
    except ImportError as exc:
        raise DatabaseError(
            f"The driver of {url.drivername!r} is not installed ({exc}). Install it "
            f"or use sqlite, postgresql+psycopg or oracle+oracledb."
        ) from None
    if backend == "sqlite":
        _prepare_sqlite(engine)
    return engine


def _prepare_sqlite(engine: Engine) -> None:
    """Make SQLite transactional for DDL too and create the database's folder."""
    database = engine.url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)

    # pysqlite opens transactions only before DML; take over so BEGIN covers DDL too.
    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _explicit_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")


def dialect_of(bind: Engine | Connection) -> str:
    """Return the dialect name (``sqlite``, ``postgresql``, ``oracle``) of ``bind``."""
    return bind.dialect.name


def get_panda_tables(settings: Settings, bind: Engine | Connection) -> PandaTables:
    """Return PanDA's Table objects in the schema configured for ``bind``'s dialect."""
    dialect = dialect_of(bind)
    return panda_tables(
        settings.schema_for(dialect), settings.archive_schema_for(dialect)
    )


def get_plugin_tables(settings: Settings, bind: Engine | Connection) -> PluginTables:
    """Return the plugin's Table objects in the schema configured for the dialect."""
    return plugin_tables(settings.plugin_schema_for(dialect_of(bind)))


_MISSING_TABLE_MARKERS = (
    "no such table",
    "does not exist",
    "ora-00942",
    "undefinedtable",
)
#: A right the account lacks (PostgreSQL 42501, Oracle ORA-01031, a read-only file).
_PRIVILEGE_MARKERS = (
    "permission denied",
    "insufficientprivilege",
    "ora-01031",
    "readonly database",
)
_UNREACHABLE_MARKERS = (
    "could not connect",
    "connection refused",
    "connection failed",
    "unable to open database file",
    "could not translate host name",
    "timeout expired",
    "name or service not known",
    "dpy-6005",
    "ora-12541",
)


def describe_error(exc: SQLAlchemyError, bind: Engine | Connection) -> DatabaseError:
    """Return a one-line :class:`DatabaseError` for a failure of ``bind``'s database."""
    where = safe_url(bind.engine.url)
    original = getattr(exc, "orig", None) or exc
    first_line = (str(original).strip().splitlines() or [type(original).__name__])[0]
    text = f"{type(original).__name__} {first_line}".lower()
    if any(marker in text for marker in _UNREACHABLE_MARKERS) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    ):
        return DatabaseError(
            f"Cannot reach the database at {where}: {first_line}. Check that the "
            f"server runs and that {URL_ENV} names the right host, port and database."
        )
    if any(marker in text for marker in _PRIVILEGE_MARKERS):
        return DatabaseError(
            f"The database account at {where} lacks a right: {first_line}. Grant the "
            "rights listed under 'Database accounts and rights' in "
            "docs/operations.md; no task is to blame."
        )
    if any(marker in text for marker in _MISSING_TABLE_MARKERS):
        return DatabaseError(
            f"A table is missing in the database at {where}: {first_line}. Run "
            f"'panda-predictor db init' (add --with-panda-tables on a test database)."
        )
    return DatabaseError(f"The database at {where} failed: {first_line}")


@contextmanager
def translate_errors(bind: Engine | Connection) -> Iterator[None]:
    """Re-raise SQLAlchemy errors in the block as a one-line :class:`DatabaseError`."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise describe_error(exc, bind) from exc
