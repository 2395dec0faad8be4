"""The Spark engine's helpers that need no running session."""

from __future__ import annotations

from pipelines.labels.spark.progress import spark_progress
from pipelines.labels.spark.session import running_session, spark_session


def test_a_disabled_progress_bar_never_touches_spark():
    with spark_progress(None, job_rows=1000, enabled=False):
        pass  # a None session would fail on any call


def test_the_session_helpers_are_there_for_the_engine():
    assert callable(spark_session) and callable(running_session)
