"""The plugin's record of handled messages: keys, outcomes, redeliveries."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from panda_predictor.db.messages import (
    OUTCOMES,
    applied_keys,
    count_redelivery,
    get_message_tables,
    record_handled,
)


def _row(key: str, outcome: str = "applied") -> dict:
    return {
        "idempotency_key": key,
        "jeditaskid": 42,
        "outcome": outcome,
        "reason": None,
        "message_id": f"m-{key}",
        "received_at": datetime(2026, 1, 2, 3, 4, 5),
        "deliveries": 1,
        "host": "test",
    }


def test_handled_keys_are_known_and_redeliveries_counted(db, settings):
    assert set(OUTCOMES) >= {"applied", "refused"}
    with db.begin() as conn:
        record_handled(conn, settings, [_row("a"), _row("b", "refused")])
        record_handled(conn, settings, [])
    with db.begin() as conn:
        assert applied_keys(conn, settings, ["a", "b", "c", "a"]) == {"a", "b"}
        count_redelivery(conn, settings, ["a"])
        count_redelivery(conn, settings, [])
    applied = get_message_tables(settings, db).applied
    with db.connect() as conn:
        rows = dict(
            conn.execute(
                sa.select(applied.c.idempotency_key, applied.c.deliveries)
            ).all()
        )
    assert rows == {"a": 2, "b": 1}


def test_many_keys_are_looked_up_in_chunks(db, settings):
    keys = [f"k{i:05d}" for i in range(2500)]
    with db.begin() as conn:
        record_handled(conn, settings, [_row(k) for k in keys[::2]])
        assert applied_keys(conn, settings, keys) == set(keys[::2])
