"""Read the plugin's audit row of a task (what was predicted and decided, and when)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from panda_predictor.db.engine import get_plugin_tables, translate_errors
from panda_predictor.settings import Settings


def read_audit(
    bind: Connection | Engine, settings: Settings, task_id: int
) -> dict[str, Any] | None:
    """Return the audit row of ``task_id`` as a plain dict, or None when absent.

    Dates are ISO 8601 strings so the row can go straight into JSON.

    Parameters
    ----------
    bind:
        Connection or engine of the PanDA database.
    settings:
        Settings naming the plugin's schema.
    task_id:
        The task's JEDITASKID.
    """
    audit = get_plugin_tables(settings, bind).audit
    query = (
        sa.select(audit)
        .where(audit.c.jeditaskid == sa.bindparam("task_id"))
        .prefix_with("/* audit.read_audit */", dialect="*")
    )
    with translate_errors(bind):
        if isinstance(bind, Engine):
            with bind.connect() as conn:
                row = conn.execute(query, {"task_id": int(task_id)}).mappings().first()
        else:
            row = bind.execute(query, {"task_id": int(task_id)}).mappings().first()
    if row is None:
        return None
    return {
        key: value.isoformat() if isinstance(value, datetime) else value
        for key, value in row.items()
    }
