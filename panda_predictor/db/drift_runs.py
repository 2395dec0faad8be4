"""Keep drift checks in the database table ``pp_drift_run`` and read the latest back.

The table (``sql/<dialect>/plugin/0003_drift_runs.sql``) replaces the JSON files a
drift check used to leave in its own home folder: the retrain job, the drift check,
the monitoring report and the HTTP service may run on different machines, and they
already share the database. Per-feature and per-target figures are JSON text, so a
new feature needs no schema change. Every statement carries a ``/* drift_runs.* */``
tag and bind variables.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, Text
from sqlalchemy.engine import Engine

from panda_predictor.core.assess.drift_verdict import VERDICTS
from panda_predictor.db.engine import dialect_of, translate_errors
from panda_predictor.settings import Settings, load_settings

#: Keys of one feature's figures in a run.
FEATURE_KEYS = ("psi", "threshold", "alarm")


@lru_cache(maxsize=8)
def drift_run_table(schema: str | None) -> Table:
    """Describe ``pp_drift_run`` in ``schema`` (see 0003_drift_runs.sql)."""
    return Table(
        "pp_drift_run",
        MetaData(schema=schema),
        Column("run_id", String(32), primary_key=True),
        Column("run_at", DateTime, nullable=False),
        Column("verdict", String(20), nullable=False),
        Column("model_name", String(128)),
        Column("model_version", String(64)),
        Column("window_start", DateTime),
        Column("window_end", DateTime),
        Column("n_tasks", Integer),
        Column("n_outcomes", Integer),
        Column("features", Text, nullable=False),
        Column("under_allocation", Text, nullable=False),
    )


def _table(engine: Engine, settings: Settings) -> Table:
    return drift_run_table(settings.plugin_schema_for(dialect_of(engine)))


def _finite(name: str, value: Any) -> float:
    """Return ``value`` as a float, or raise naming ``name`` (JSON has no NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(
            f"The '{name}' must be a finite number. Got {value!r} instead."
        )
    return number


def _check_features(features: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in features.items():
        missing = [k for k in FEATURE_KEYS if k not in values]
        if missing:
            raise ValueError(
                f"The figures of feature {name!r} must have the keys "
                f"{list(FEATURE_KEYS)}. Got none for {missing} instead."
            )
        out[str(name)] = {
            "psi": _finite(f"{name}.psi", values["psi"]),
            "threshold": _finite(f"{name}.threshold", values["threshold"]),
            "alarm": bool(values["alarm"]),
            # Extra figures (drifted, unseen share) are kept as they came.
            **{
                k: v
                for k, v in values.items()
                if k not in FEATURE_KEYS and isinstance(v, bool | int | float | str)
            },
        }
    return out


def record_drift_run(
    engine: Engine,
    settings: Settings,
    *,
    verdict: str,
    features: Mapping[str, Mapping[str, Any]],
    under_allocation: Mapping[str, float],
    model_version: str | int | None = None,
    model_name: str | None = None,
    run_at: datetime | None = None,
    window: tuple[datetime, datetime] | None = None,
    n_tasks: int | None = None,
    n_outcomes: int | None = None,
) -> str:
    """Insert one drift run in one transaction and return its id.

    Parameters
    ----------
    engine, settings:
        The plugin's database and the settings naming its schema.
    verdict:
        ``drift``, ``no_drift`` or ``too_few_outcomes``.
    features:
        Per feature ``{"psi", "threshold", "alarm"}`` (extra scalar keys are kept).
    under_allocation:
        Per target the feedback under-allocation rate (only targets with outcomes).
    model_version, model_name:
        The champion the check compared against.
    run_at:
        When the check ran (UTC, naive); default now.
    window:
        ``(since, until)`` of the task creation window checked.
    n_tasks, n_outcomes:
        Recent tasks and scored outcomes the verdict rests on.
    """
    if verdict not in VERDICTS:
        raise ValueError(
            f"The 'verdict' must be one of {list(VERDICTS)}. Got {verdict!r} instead."
        )
    rates = {
        str(t): _finite(f"under_allocation.{t}", v) for t, v in under_allocation.items()
    }
    run_id = uuid.uuid4().hex
    row = {
        "run_id": run_id,
        "run_at": run_at or datetime.now(UTC).replace(tzinfo=None),
        "verdict": verdict,
        "model_name": model_name,
        "model_version": None if model_version is None else str(model_version),
        "window_start": window[0] if window else None,
        "window_end": window[1] if window else None,
        "n_tasks": n_tasks,
        "n_outcomes": n_outcomes,
        "features": json.dumps(_check_features(features), sort_keys=True),
        "under_allocation": json.dumps(rates, sort_keys=True),
    }
    table = _table(engine, settings)
    statement = table.insert().prefix_with(
        "/* drift_runs.record_drift_run */", dialect="*"
    )
    with translate_errors(engine), engine.begin() as conn:
        conn.execute(statement, row)
    return run_id


def recent_drift_runs(
    engine: Engine, limit: int = 20, settings: Settings | None = None
) -> list[dict[str, Any]]:
    """Return the newest ``limit`` drift runs, newest first.

    Each run is ``{"run_at": datetime, "verdict": str, "model_version": str | None,
    "features": {name: {"psi": float, "threshold": float, "alarm": bool, ...}},
    "under_allocation": {target: float}}`` plus ``window_start``, ``window_end``,
    ``n_tasks`` and ``n_outcomes``.

    Parameters
    ----------
    engine:
        The plugin's database.
    limit:
        How many runs at most.
    settings:
        Settings naming the plugin schema; default: the environment's settings.
    """
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(
            f"The 'limit' must be a positive integer. Got {limit!r} instead."
        )
    table = _table(engine, settings or load_settings())
    query = (
        sa.select(table)
        .order_by(table.c.run_at.desc(), table.c.run_id)
        .limit(sa.bindparam("limit", limit, literal_execute=True))
        .prefix_with("/* drift_runs.recent_drift_runs */", dialect="*")
    )
    with translate_errors(engine), engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    return [
        {
            "run_at": row["run_at"],
            "verdict": row["verdict"],
            "model_version": row["model_version"],
            "features": json.loads(row["features"]),
            "under_allocation": json.loads(row["under_allocation"]),
            "window_start": row["window_start"],
            "window_end": row["window_end"],
            "n_tasks": row["n_tasks"],
            "n_outcomes": row["n_outcomes"],
        }
        for row in rows
    ]
