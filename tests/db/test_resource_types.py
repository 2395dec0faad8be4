"""PanDA's RESOURCE_TYPES rows, or None where the table is absent or empty."""

from __future__ import annotations

import sqlalchemy as sa

from panda_predictor.core.domain.resource_type import ResourceType
from panda_predictor.db.engine import dialect_of
from panda_predictor.db.resource_types import read_resource_types


def test_rows_read_in_panda_s_order_then_none_once_empty(db, settings):
    with db.connect() as conn:
        types = read_resource_types(conn, settings)
    assert types and all(isinstance(t, ResourceType) for t in types)
    assert ResourceType("SCORE", 1, 1, None, 2000) in types

    schema = settings.schema_for(dialect_of(db))
    with db.begin() as conn:
        conn.execute(sa.delete(sa.table("resource_types", schema=schema)))
        assert read_resource_types(conn, settings) is None


def test_a_database_without_the_table_gives_none(engine, settings):
    with engine.connect() as conn:
        assert read_resource_types(conn, settings) is None
