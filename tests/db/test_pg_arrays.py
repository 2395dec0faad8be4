"""PostgreSQL's one-array-per-column statements: ANY(:array) and INSERT ... unnest."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa

from panda_predictor.db.pg_arrays import any_of, array_type, insert_unnest, table_name

MD = sa.MetaData()
ITEMS = sa.Table(
    "pp_test_items",
    MD,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("count", sa.Integer),
    sa.Column("name", sa.String(20)),
    sa.Column("seen", sa.DateTime),
)


def test_array_types_follow_the_column_types():
    assert [array_type(c) for c in ITEMS.c] == [
        "bigint[]",
        "integer[]",
        "text[]",
        "timestamp[]",
    ]


def test_table_names_carry_their_schema():
    assert table_name(ITEMS) == "pp_test_items"
    assert (
        table_name(ITEMS.to_metadata(sa.MetaData(), schema="s1")) == "s1.pp_test_items"
    )


@pytest.mark.postgres
def test_unnest_inserts_and_any_selects_on_postgresql(pg_schema):
    from tests.conftest import POSTGRES_URL

    table = ITEMS.to_metadata(sa.MetaData(), schema=pg_schema)
    engine = sa.create_engine(POSTGRES_URL)
    try:
        table.create(engine)
        rows = [
            {"id": i, "count": i * 2, "name": f"n{i}", "seen": datetime(2026, 1, i)}
            for i in (1, 2, 3)
        ]
        with engine.begin() as conn:
            insert_unnest(conn, table, rows, "test.unnest")
            insert_unnest(conn, table, [], "test.unnest")
        with engine.connect() as conn:
            query = sa.select(table.c.id, table.c.name).where(
                any_of(table.c.id, [1, 3])
            )
            found = sorted(conn.execute(query))
            text = str(query.compile(dialect=conn.dialect))
        assert found == [(1, "n1"), (3, "n3")]
        assert "= ANY (" in text and text.count("%(") == 1  # one parameter
    finally:
        engine.dispose()
