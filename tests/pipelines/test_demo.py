"""The demo's own rules (the whole demo: tests/end_to_end/test_cli_pipeline.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from panda_predictor.errors import UserInputError
from panda_predictor.settings import load_settings
from pipelines.demo import history_end, reset_embedded_store


def test_the_history_ends_at_yesterdays_midnight():
    end = history_end()
    now = datetime.now(UTC).replace(tzinfo=None)
    assert (end.hour, end.minute, end.second) == (0, 0, 0)
    # The start of yesterday: between one and two days ago.
    assert timedelta(days=1) <= now - end < timedelta(days=2)


def test_the_reset_touches_only_the_embedded_default(tmp_path):
    (tmp_path / "panda.sqlite").write_text("x")
    (tmp_path / "reports").mkdir()
    (tmp_path / "keep.txt").write_text("mine")
    reset_embedded_store(load_settings(home=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    explicit = load_settings(home=tmp_path, db_url=f"sqlite:///{tmp_path}/other.db")
    with pytest.raises(UserInputError, match="embedded default"):
        reset_embedded_store(explicit)
