"""The demo's own rules (the whole demo: tests/end_to_end/test_cli_pipeline.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from panda_predictor.errors import UserInputError
from panda_predictor.settings import load_settings
from pipelines.demo import history_end, reset_embedded_store
from pipelines.simulation.config import DEFAULT_END_DATE


def test_the_history_ends_at_a_midnight_of_the_last_week_on_a_fixed_weekday():
    end = history_end()
    now = datetime.now(UTC).replace(tzinfo=None)
    assert (end.hour, end.minute, end.second) == (0, 0, 0)
    # Inside the hook's window (no later than yesterday, at most 8 days ago), and
    # on 2026-01-01's weekday, so the creation weekdays are the same every day.
    assert timedelta(days=1) <= now - end < timedelta(days=8)
    assert end.weekday() == DEFAULT_END_DATE.weekday()


def test_the_reset_touches_only_the_embedded_default(tmp_path):
    (tmp_path / "panda.sqlite").write_text("x")
    (tmp_path / "reports").mkdir()
    (tmp_path / "keep.txt").write_text("mine")
    reset_embedded_store(load_settings(home=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    explicit = load_settings(home=tmp_path, db_url=f"sqlite:///{tmp_path}/other.db")
    with pytest.raises(UserInputError, match="embedded default"):
        reset_embedded_store(explicit)


def test_mlflow_says_nothing_at_info_while_the_demo_runs(tmp_path):
    """MLflow sets its logger to INFO on its first import: in a fresh process, a
    new store made inside the demo's quiet block must print none of its INFO
    lines ("Creating initial MLflow database tables...")."""
    code = (
        "import logging\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "from pipelines.demo import quiet_steps\n"
        "with quiet_steps():\n"
        "    import mlflow\n"
        f"    mlflow.set_tracking_uri('sqlite:///{tmp_path}/mlflow.db')\n"
        "    mlflow.MlflowClient().search_experiments()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    assert (tmp_path / "mlflow.db").is_file()
    assert "Creating initial MLflow database tables" not in done.stderr, done.stderr
    assert "INFO" not in done.stderr, done.stderr
