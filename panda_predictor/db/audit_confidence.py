"""Read the confidence the plugin had in each audited prediction, per target.

The outcome table keeps the classes written and the truth but not the probability
behind them; the monitoring report joins this on ``jeditaskid`` to draw calibration
and coverage-versus-accuracy curves.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.db.engine import get_plugin_tables, translate_errors
from panda_predictor.settings import Settings


def read_confidences(
    bind: Connection | Engine,
    settings: Settings,
    since: datetime | None = None,
    until: datetime | None = None,
) -> pd.DataFrame:
    """Return ``jeditaskid`` and ``<target>_confidence`` of the audit rows.

    Parameters
    ----------
    bind:
        Connection or engine of the PanDA database.
    settings:
        Settings naming the plugin's schema.
    since, until:
        Window of prediction times (``predicted_at``); default: every row.
    """
    audit = get_plugin_tables(settings, bind).audit
    cols = [audit.c.jeditaskid, *(audit.c[f"{t}_confidence"] for t in TARGET_NAMES)]
    query = (
        sa.select(*cols)
        .order_by(audit.c.jeditaskid)
        .prefix_with("/* audit_confidence.read_confidences */", dialect="*")
    )
    if since is not None:
        query = query.where(audit.c.predicted_at >= sa.bindparam("since", since))
    if until is not None:
        query = query.where(audit.c.predicted_at < sa.bindparam("until", until))
    with translate_errors(bind):
        if isinstance(bind, Engine):
            with bind.connect() as conn:
                rows = conn.execute(query).all()
        else:
            rows = bind.execute(query).all()
    frame = pd.DataFrame(rows, columns=[c.name for c in cols])
    for target in TARGET_NAMES:
        frame[f"{target}_confidence"] = frame[f"{target}_confidence"].astype(float)
    return frame
