"""Read PanDA's RESOURCE_TYPES table, for the resource type of a rewritten ramCount.

PanDA resets a task's resource type after a ramCount change
(``reset_resource_type_task``), so both writers (the database hook's
:mod:`panda_predictor.db.writer` and the message route's ``SqlTaskWriter``) set it
in the same UPDATE, by PanDA's rule (:mod:`panda_predictor.core.domain.resource_type`).
A database without the table, or with an empty one, gives None: the writer then
leaves the column as it is and says so in the audit (PanDA itself would match
nothing and store ``Undefined``, which no queue serves).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from panda_predictor.core.domain.resource_type import ResourceType
from panda_predictor.db.engine import dialect_of
from panda_predictor.settings import Settings

#: RESOURCE_TYPES columns, in :class:`ResourceType`'s order.
_COLUMNS = ("resource_name", "mincore", "maxcore", "minrampercore", "maxrampercore")


def read_resource_types(
    conn: Connection, settings: Settings
) -> list[ResourceType] | None:
    """Return PanDA's RESOURCE_TYPES rows as PanDA reads them; None: none there."""
    schema = settings.schema_for(dialect_of(conn))
    if not sa.inspect(conn).has_table("resource_types", schema=schema):
        return None
    table = sa.table("resource_types", *(sa.column(c) for c in _COLUMNS), schema=schema)
    query = sa.select(*(table.c[c] for c in _COLUMNS)).prefix_with(
        "/* resource_types.read_resource_types */", dialect="*"
    )
    return [ResourceType(*row) for row in conn.execute(query)] or None
