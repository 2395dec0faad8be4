"""The benchmark states why the production decision missed top-class tasks."""

from __future__ import annotations

import numpy as np

from pipelines.evaluation.trace.benchmark import tail_misses
from pipelines.evaluation.trace.log_walk import fit_trace_bins
from pipelines.evaluation.trace.target_run import PRODUCTION, TargetRun


def _run(y_true, production, model, applied) -> TargetRun:
    bins, _ = fit_trace_bins({"ramcount": np.arange(1.0, 401.0)})  # 4 classes
    rows = np.arange(len(y_true))
    run = TargetRun("ramcount", bins["ramcount"], rows, np.array(y_true), rows * 1.0)
    run.predicted = {PRODUCTION: np.array(production), "model:xgboost": np.array(model)}
    run.applied = {PRODUCTION: np.array(applied, dtype=bool)}
    return run


def test_misses_are_split_between_the_model_and_the_combination():
    # Four top-class tasks (class 3): one right, one the model missed (applied:
    # written low), two the combination moved down (one applied, one kept scouts).
    run = _run(
        y_true=[3, 3, 3, 3, 0, 1],
        production=[3, 1, 2, 2, 0, 3],
        model=[3, 1, 3, 3, 0, 3],
        applied=[1, 1, 1, 0, 1, 1],
    )
    tails = tail_misses(run)
    assert tails["top_tasks"] == 4
    assert tails["missed"] == 0.75
    assert tails["missed_by_model"] == 0.25
    assert tails["missed_by_combination"] == 0.5
    assert tails["written_low"] == 0.5


def test_a_test_part_without_top_class_tasks_says_so():
    run = _run(y_true=[0, 1], production=[0, 1], model=[0, 1], applied=[1, 1])
    assert tail_misses(run) == {"top_tasks": 0}
