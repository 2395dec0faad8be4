"""``panda-predictor db``: create, upgrade and check the database tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from panda_predictor.settings import Settings


def _run(ctx: click.Context, action: Callable[[Any, Settings], Any]) -> Any:
    """Run ``action(engine, settings)``; turn database errors into one clear line."""
    from panda_predictor.cli.errors import user_errors
    from panda_predictor.db.engine import make_engine

    settings: Settings = ctx.obj
    with user_errors():  # a DatabaseError is user-fixable: one line, exit 1
        engine = make_engine(settings)
        try:
            return action(engine, settings)
        finally:
            engine.dispose()


def _where(settings: Settings) -> str:
    from panda_predictor.db.engine import safe_url

    return safe_url(settings.database_url())


@click.group()
def db() -> None:
    """Create, upgrade and check panda-predictor's tables in the PanDA database.

    The database is PANDA_PREDICTOR_DB_URL (default: SQLite under
    PANDA_PREDICTOR_HOME); PanDA's tables are in PANDA_PREDICTOR_DB_SCHEMA, the
    plugin's in PANDA_PREDICTOR_PLUGIN_SCHEMA. See docs/database.md.

    \b
    Examples:
      panda-predictor db init --with-panda-tables
      panda-predictor db upgrade && panda-predictor db check
    """


@db.command()
@click.option(
    "--with-panda-tables",
    is_flag=True,
    help="Also create JEDI_TASKS, JEDI_DATASETS and JOBSARCHIVED4 (test and "
    "development databases only; on a real PanDA database they belong to PanDA).",
)
@click.pass_context
def init(ctx: click.Context, with_panda_tables: bool) -> None:
    """Create the plugin's tables; safe to run again.

    Without --with-panda-tables it first checks that PanDA's tables have every
    column the plugin reads or writes, and creates nothing if not. Needs the right
    to create tables (and, on PostgreSQL, a missing schema) in the plugin schema and
    to read PanDA's table descriptions.

    \b
    Examples:
      panda-predictor db init                      # next to PanDA's own tables
      panda-predictor db init --with-panda-tables  # a development database
    """
    from panda_predictor.db.migrations import init_database

    versions = _run(
        ctx,
        lambda engine, settings: init_database(engine, settings, with_panda_tables),
    )
    summary = ", ".join(f"{name} at version {v}" for name, v in versions.items())
    click.echo(f"Database {_where(ctx.obj)} initialised: {summary}.")


@db.command()
@click.pass_context
def upgrade(ctx: click.Context) -> None:
    """Apply the pending numbered patches from sql/ to an initialised database.

    Each patch runs in one transaction (PostgreSQL, SQLite) and bumps its row in
    pp_schema_version. Needs the right to create and alter the plugin's tables.

    \b
    Example (after installing a new release):
      panda-predictor db upgrade && panda-predictor db check
    """
    from panda_predictor.db.migrations import upgrade_database

    changes = _run(ctx, upgrade_database)
    for name, (old, new) in changes.items():
        state = f"{old} -> {new}" if new != old else f"{new} (already current)"
        click.echo(f"{name}: version {state}")


@db.command()
@click.pass_context
def check(ctx: click.Context) -> None:
    """Check the connection, the plugin's schema version and PanDA's columns.

    Exits non-zero, naming each problem, if anything is off. Needs only read access
    (SELECT on pp_schema_version and PanDA's table descriptions).

    \b
    Example:
      panda-predictor --config /etc/panda-predictor.yaml db check
    """
    from panda_predictor.db.engine import DatabaseError
    from panda_predictor.db.migrations import (
        check_panda_columns,
        require_current_schema,
    )

    def _check(engine: Any, settings: Settings) -> list[str]:
        problems = list(check_panda_columns(engine, settings))
        try:
            version = require_current_schema(engine, settings)
        except DatabaseError as exc:
            problems.append(str(exc))
            version = None
        if version is not None:
            click.echo(f"plugin schema at version {version} (current)")
        return problems

    problems = _run(ctx, _check)
    if problems:
        raise click.ClickException("; ".join(problems))
    click.echo(f"Database {_where(ctx.obj)} is ready: PanDA columns present.")
