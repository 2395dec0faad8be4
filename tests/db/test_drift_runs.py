"""Drift runs kept in pp_drift_run, on SQLite and PostgreSQL."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from panda_predictor.db.drift_runs import (
    drift_run_table,
    recent_drift_runs,
    record_drift_run,
)

FEATURES = {
    "corecount": {"psi": 0.31, "threshold": 0.22, "alarm": True, "drifted": True},
    "campaign": {"psi": 4.7, "threshold": 0.21, "alarm": False},
}
DAY = datetime(2026, 11, 1, 6, 0)


def record(db, settings, day: int, verdict: str = "no_drift", **kwargs):
    return record_drift_run(
        db,
        settings,
        verdict=verdict,
        features=kwargs.pop("features", FEATURES),
        under_allocation=kwargs.pop("under_allocation", {"ramcount": 0.4}),
        model_version=kwargs.pop("model_version", 7),
        run_at=DAY + timedelta(days=day),
        **kwargs,
    )


def test_runs_come_back_newest_first_in_the_documented_shape(db, settings):
    record(db, settings, 0, "too_few_outcomes", n_outcomes=40)
    record(db, settings, 2, "drift", window=(DAY, DAY + timedelta(days=2)))
    record(db, settings, 1, model_version=None)
    runs = recent_drift_runs(db, 10, settings)
    assert [r["verdict"] for r in runs] == ["drift", "no_drift", "too_few_outcomes"]
    newest = runs[0]
    assert newest["run_at"] == DAY + timedelta(days=2)
    assert isinstance(newest["run_at"], datetime)
    assert newest["model_version"] == "7"
    assert runs[1]["model_version"] is None
    assert newest["features"]["campaign"] == {
        "psi": 4.7,
        "threshold": 0.21,
        "alarm": False,
    }
    assert newest["features"]["corecount"]["alarm"] is True
    assert newest["features"]["corecount"]["drifted"] is True
    assert newest["under_allocation"] == {"ramcount": 0.4}
    assert (newest["window_start"], newest["window_end"]) == (
        DAY,
        DAY + timedelta(days=2),
    )
    assert runs[2]["n_outcomes"] == 40
    assert [r["verdict"] for r in recent_drift_runs(db, 2, settings)] == [
        "drift",
        "no_drift",
    ]


def test_an_empty_table_gives_no_runs(db, settings):
    assert recent_drift_runs(db, 5, settings) == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"verdict": "maybe"}, r"'verdict' must be one of .*Got 'maybe' instead"),
        (
            {"features": {"corecount": {"psi": 0.1, "alarm": True}}},
            r"feature 'corecount' must have the keys .*Got none for \['threshold'\]",
        ),
        (
            {"features": {"corecount": {"psi": math.nan, "threshold": 1, "alarm": 1}}},
            r"'corecount.psi' must be a finite number. Got nan instead",
        ),
        (
            {"under_allocation": {"walltime": "lots"}},
            r"'under_allocation.walltime' must be a finite number. Got 'lots'",
        ),
    ],
    ids=["verdict", "feature-keys", "nan-psi", "bad-rate"],
)
def test_bad_runs_are_refused_and_nothing_is_written(db, settings, kwargs, match):
    with pytest.raises(ValueError, match=match):
        record(db, settings, 0, **kwargs)
    table = drift_run_table(drift_table_schema(db, settings))
    with db.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 0


def test_limit_must_be_positive(db, settings):
    with pytest.raises(ValueError, match="'limit' must be a positive integer. Got 0"):
        recent_drift_runs(db, 0, settings)


def drift_table_schema(db, settings):
    from panda_predictor.db.engine import dialect_of

    return settings.plugin_schema_for(dialect_of(db))
