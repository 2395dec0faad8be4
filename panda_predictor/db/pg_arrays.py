"""Set-based statements for PostgreSQL: one array parameter per column, not per row.

A batch of N rows sent as ``IN (:v1, ..., :vN)`` or as N executions of one INSERT
costs the driver N parameters to render and the server N statements to plan or run;
sent as arrays (``= ANY(:values)``, ``INSERT ... SELECT FROM unnest(...)``) the
statement's text is the same for every batch, so psycopg prepares it once per
connection, and the server runs one statement. Used by the scout_prediction route
(:mod:`panda_predictor.db.messages`, :mod:`panda_predictor.plugins.task_writers`),
whose batches are hundreds of messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection

#: PostgreSQL array type of each SQLAlchemy column type; any other is sent as text.
_ARRAY_OF = {
    "Integer": "integer[]",
    "SmallInteger": "smallint[]",
    "BigInteger": "bigint[]",
    "DateTime": "timestamp[]",
}


def array_type(column: sa.Column) -> str:
    """Return the PostgreSQL array type a column's values are sent as."""
    return _ARRAY_OF.get(type(column.type).__name__, "text[]")


def any_of(column: sa.Column, values: Sequence[Any]) -> sa.ColumnElement[bool]:
    """Return ``column = ANY(:array)``: one parameter, whatever the number of values."""
    return column == sa.any_(sa.bindparam(None, list(values), type_=ARRAY(column.type)))


def table_name(table: sa.Table) -> str:
    """Return the table's name, qualified by its schema when it has one."""
    return f"{table.schema}.{table.name}" if table.schema else table.name


def insert_unnest(
    conn: Connection, table: sa.Table, rows: list[dict[str, Any]], tag: str
) -> None:
    """Insert ``rows`` (dicts with the same keys) in one INSERT ... unnest statement.

    Parameters
    ----------
    tag:
        The caller's ``module.function``, put in the statement for the DBA.
    """
    if not rows:
        return
    names = list(rows[0])
    arrays = ", ".join(
        f"CAST(:a_{name} AS {array_type(table.c[name])})" for name in names
    )
    statement = sa.text(
        f"/* {tag} */ INSERT INTO {table_name(table)} ({', '.join(names)}) "
        f"SELECT * FROM unnest({arrays})"
    )
    conn.execute(statement, {f"a_{n}": [row[n] for row in rows] for n in names})
