"""The Spark engine's helpers that need no running session (the session itself is
the suite's one shared Spark session, made in conftest.py)."""

from __future__ import annotations

from pipelines.labels.spark.progress import spark_progress


def test_a_disabled_progress_bar_never_touches_spark():
    with spark_progress(None, job_rows=1000, enabled=False):
        pass  # a None session would fail on any call
