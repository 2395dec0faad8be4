"""What can be run: the one map from a pipeline's name to its runner.

Kedro keeps a ``pipeline_registry.py`` for the same reason: a newcomer finds every
runnable pipeline, and the function that runs it, in one place instead of reading
every command. Each entry names ``module:function`` rather than the function itself,
so that looking a runner up imports only its own module (``panda-predictor --help``
stays fast, and a run of ``drift`` never imports TensorFlow or Spark).

The command line resolves its runners here where it chooses one by name (the label
engines); ``tests/pipelines/test_pipeline_registry.py`` checks that every entry
resolves to a callable and that every command that runs a pipeline is listed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: Pipeline name -> ``"module:function"`` of its runner (names as the commands').
PIPELINES: dict[str, str] = {
    # Data in: a simulated history, its labels, Parquet exports.
    "simulate": "pipelines.simulation.history_writer:load_history",
    "labels": "pipelines.labels.build:run",
    "labels-sql": "pipelines.labels.build:run_sql",
    "labels-spark": "pipelines.labels.build:run_spark",
    "export": "pipelines.export.parquet:export_history",
    # Models out: train, register and gate; retrain on the deployment's cadence.
    "train": "pipelines.retraining.train_and_register:train_and_register",
    "retrain": "pipelines.retraining.retrain:run_retrain",
    # Watching what is served.
    "feedback": "pipelines.monitoring.feedback:run_feedback",
    "what-if": "pipelines.monitoring.what_if_report:what_if_report",
    "drift": "pipelines.monitoring.drift:check_drift",
    "report": "pipelines.monitoring.report:render_report",
    # Honest figures.
    "evaluate": "pipelines.evaluation.champion:run_evaluation",
    "benchmark": "pipelines.evaluation.trace.benchmark:run_benchmark",
    "replay-simulated": "pipelines.evaluation.replay_simulated:replay_simulated",
    # Everything above, end to end, on the embedded default.
    "demo": "pipelines.demo:run_demo",
}


def runner(name: str) -> Callable[..., Any]:
    """Return the runner of the pipeline called ``name`` (imported on first use)."""
    try:
        target = PIPELINES[name]
    except KeyError:
        raise KeyError(
            f"The pipeline name must be one of {sorted(PIPELINES)}. Got {name!r} "
            "instead."
        ) from None
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
