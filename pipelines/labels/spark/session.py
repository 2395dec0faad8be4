"""The Spark session the label engine runs in: any master, UTC, numpy's arithmetic."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from panda_predictor.errors import UserInputError


def _session_class() -> Any:
    """Return pyspark's SparkSession, or say how to install it."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise UserInputError(
            "The Spark label engine needs pyspark. Got no pyspark in this "
            "environment instead; install the extra: pip install "
            "'panda-predictor[spark]'."
        ) from exc
    return SparkSession


def spark_session(master: str = "local[2]", conf: dict[str, str] | None = None) -> Any:
    """Return a Spark session on ``master`` (``local[N]``, ``yarn``, ``k8s://...``).

    Two settings are fixed because the labels depend on them:

    - ``spark.sql.session.timeZone=UTC``: PanDA's times are UTC and naive; any other
      zone would shift STARTTIME/ENDTIME and so the labels' time stamps.
    - ``spark.sql.ansi.enabled=false``: a division by zero gives NULL (ignored, as
      numpy's NaN is) instead of failing the job; the formulas guard every divisor,
      so this only matters for malformed rows.

    Parameters
    ----------
    master:
        Spark master URL.
    conf:
        More Spark settings (``spark.executor.memory``, ...), applied last.
    """
    builder = (
        _session_class()
        .builder.master(master)
        .appName("panda-predictor-labels")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    # py4j logs every connection at INFO; only its problems matter here.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def running_session(
    master: str = "local[2]", conf: dict[str, str] | None = None
) -> Iterator[Any]:
    """Yield a Spark session; stop it afterwards only if this call started it.

    A session already running in the process (a notebook's, a test suite's) is
    used as it is and left running.
    """
    existing = _session_class().getActiveSession()
    session = existing or spark_session(master, conf)
    try:
        yield session
    finally:
        if existing is None:
            session.stop()
