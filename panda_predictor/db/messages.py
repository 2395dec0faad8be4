"""The tables of the scout_prediction message route and the rows they get.

``pp_message_published`` (the hook's ``publish`` output) gets a row per message
once the broker's receipt came, in the same transaction as the task's audit row in
``pp_prediction_audit``: so a task is audited as published only after its receipt,
and a task whose receipt never came stays eligible and is published again.
``pp_message_applied`` is the AIParameterAdjuster plugin's record of every message
it handled, keyed by idempotency key (see ``sql/*/plugin/0004_messages.sql``).
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.db.audit_writer import audit_row
from panda_predictor.db.engine import dialect_of, get_plugin_tables, translate_errors
from panda_predictor.db.pg_arrays import any_of, insert_unnest
from panda_predictor.settings import Settings

#: Outcomes of a handled message in ``pp_message_applied``.
OUTCOMES = ("applied", "kept_scouts", "refused", "rejected", "expired")


@dataclass(frozen=True)
class MessageTables:
    """The message route's tables."""

    published: sa.Table
    applied: sa.Table


@lru_cache(maxsize=8)
def message_tables(schema: str | None) -> MessageTables:
    """Describe ``pp_message_published`` and ``pp_message_applied`` in ``schema``."""
    md = sa.MetaData(schema=schema)
    published = sa.Table(
        "pp_message_published",
        md,
        sa.Column("idempotency_key", sa.String(128), primary_key=True),
        sa.Column("jeditaskid", sa.BigInteger, nullable=False),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("model_name", sa.String(128), nullable=False),
        sa.Column("model_version", sa.String(64), nullable=False),
        sa.Column("destination", sa.String(256), nullable=False),
        sa.Column("receipt", sa.String(64)),
        sa.Column("published_at", sa.DateTime, nullable=False),
        sa.Column("expires_at", sa.DateTime, nullable=False),
        sa.Column("host", sa.String(128)),
    )
    applied = sa.Table(
        "pp_message_applied",
        md,
        sa.Column("idempotency_key", sa.String(128), primary_key=True),
        sa.Column("jeditaskid", sa.BigInteger),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(400)),
        sa.Column("message_id", sa.String(128)),
        sa.Column("received_at", sa.DateTime, nullable=False),
        sa.Column("deliveries", sa.Integer, nullable=False),
        sa.Column("host", sa.String(128)),
    )
    return MessageTables(published, applied)


def get_message_tables(settings: Settings, bind: Engine | Connection) -> MessageTables:
    """Return the message tables in the plugin schema configured for ``bind``."""
    return message_tables(settings.plugin_schema_for(dialect_of(bind)))


@dataclass(frozen=True)
class Published:
    """One message the broker acknowledged: what to record for its task."""

    prediction: TaskPrediction
    idempotency_key: str
    destination: str
    receipt: str
    published_at: datetime
    expires_at: datetime


def _naive(value: datetime) -> datetime:
    return value.replace(tzinfo=None) if value.tzinfo else value


def record_published(
    engine: Engine,
    settings: Settings,
    published: Iterable[Published],
    audit_tasks: bool = True,
    fixed_units: bool | None = None,
) -> list[int]:
    """Record acknowledged messages (and audit their tasks) in one transaction.

    A task that already has an audit row keeps it (the ``both`` output audits it
    when it writes JEDI_TASKS); a key already recorded is skipped, so recording a
    republished batch again is harmless. Returns the task ids audited here.

    Parameters
    ----------
    audit_tasks:
        Also write the task's ``pp_prediction_audit`` row (``publish`` output);
        False when the database output audited it (``both``).
    """
    items = list(published)
    if not items:
        return []
    tables = get_message_tables(settings, engine)
    audit = get_plugin_tables(settings, engine).audit
    host = socket.gethostname()[:128]
    audited: list[int] = []
    with translate_errors(engine), engine.begin() as conn:
        keys = _existing(
            conn, tables.published.c.idempotency_key, [i.idempotency_key for i in items]
        )
        seen = _existing(
            conn, audit.c.jeditaskid, [i.prediction.jeditaskid for i in items]
        )
        rows: list[dict[str, Any]] = []
        audit_rows: list[dict[str, Any]] = []
        for item in items:
            p = item.prediction
            if item.idempotency_key not in keys:
                keys.add(item.idempotency_key)
                rows.append(
                    {
                        "idempotency_key": item.idempotency_key,
                        "jeditaskid": p.jeditaskid,
                        "decision": p.decision,
                        "model_name": p.model_name[:128],
                        "model_version": str(p.model_version)[:64],
                        "destination": item.destination[:256],
                        "receipt": item.receipt[:64],
                        "published_at": _naive(item.published_at),
                        "expires_at": _naive(item.expires_at),
                        "host": host,
                    }
                )
            if audit_tasks and p.jeditaskid not in seen:
                seen.add(p.jeditaskid)
                reason = f"{p.reason}; published {item.idempotency_key}"[:400]
                # written_at stays NULL: JEDI's plugin writes the task, not us.
                audit_rows.append(
                    audit_row(
                        p,
                        p.decision,
                        reason,
                        None,
                        fixed_units,
                        host,
                        _naive(item.published_at),
                    )
                )
                audited.append(p.jeditaskid)
        if rows:
            conn.execute(
                _tag(sa.insert(tables.published), "messages.record_published"), rows
            )
        if audit_rows:
            conn.execute(
                _tag(sa.insert(audit), "messages.record_published"), audit_rows
            )
    return audited


def _existing(conn: Connection, column: sa.Column, values: list[Any]) -> set[Any]:
    found: set[Any] = set()
    if dialect_of(conn) == "postgresql":  # one array: the same text for any batch
        query = sa.select(column).where(any_of(column, sorted(set(values))))
        return set(conn.execute(_tag(query, "messages.existing")).scalars())
    for chunk in _chunks(sorted(set(values))):
        query = sa.select(column).where(column.in_(chunk))
        found.update(conn.execute(_tag(query, "messages.existing")).scalars())
    return found


def _chunks(values: list[Any], size: int = 1000) -> Iterator[list[Any]]:
    # Oracle accepts at most 1000 values in an IN list.
    for start in range(0, len(values), size):
        yield values[start : start + size]


def applied_keys(conn: Connection, settings: Settings, keys: list[str]) -> set[str]:
    """Return which of ``keys`` the plugin already handled."""
    tables = get_message_tables(settings, conn)
    return _existing(conn, tables.applied.c.idempotency_key, keys)


def record_handled(
    conn: Connection, settings: Settings, rows: list[dict[str, Any]]
) -> None:
    """Insert the plugin's rows for newly handled messages (one statement)."""
    if not rows:
        return
    table = get_message_tables(settings, conn).applied
    if dialect_of(conn) == "postgresql":
        insert_unnest(conn, table, rows, "messages.record_handled")
    else:
        conn.execute(_tag(sa.insert(table), "messages.record_handled"), rows)


def count_redelivery(conn: Connection, settings: Settings, keys: list[str]) -> None:
    """Count another delivery of messages already handled (nothing else changes)."""
    if not keys:
        return
    table = get_message_tables(settings, conn).applied
    update = (
        sa.update(table)
        .where(table.c.idempotency_key == sa.bindparam("b_key"))
        .values(deliveries=table.c.deliveries + 1)
    )
    conn.execute(
        _tag(update, "messages.count_redelivery"), [{"b_key": k} for k in keys]
    )


def _tag(statement: Any, name: str) -> Any:
    return statement.prefix_with(f"/* {name} */", dialect="*")
