"""Each benchmark retraining fits on the split a production retraining registers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pipelines.evaluation.trace.log_walk import (
    WalkForwardConfig,
    _known_window,
    _retrain_at,
    fit_trace_bins,
    retraining_parts,
)

BOUNDARY = np.datetime64("2030-01-01")
BINS, _ = fit_trace_bins({"walltime": np.arange(100.0)})


@pytest.fixture
def tasks() -> pd.DataFrame:
    created = pd.date_range("2020-01-01", periods=200, freq="h")
    return pd.DataFrame({"creationdate": created, "labels_known_at": created})


def _with_training(monkeypatch, **change):
    base = WalkForwardConfig().training_config()
    monkeypatch.setattr(
        WalkForwardConfig, "training_config", lambda self: replace(base, **change)
    )


def _parts(tasks):
    config = WalkForwardConfig()
    return retraining_parts(_known_window(tasks, BOUNDARY, config), BINS, config)


def test_training_yaml_gives_the_older_90_percent_to_the_trees(tasks):
    parts = _parts(tasks)
    assert sorted(parts.train.tolist()) == list(range(180))
    assert parts.val.tolist() == parts.test.tolist() == list(range(180, 200))


def test_another_split_in_training_yaml_moves_the_benchmark_with_it(tasks, monkeypatch):
    _with_training(
        monkeypatch, train_fraction=0.7, val_fraction=0.15, test_fraction=0.15
    )
    parts = _parts(tasks)
    assert sorted(parts.train.tolist()) == list(range(170))
    assert parts.val.tolist() == parts.test.tolist() == list(range(170, 200))


def test_without_the_refit_the_benchmark_fits_the_gated_split(tasks, monkeypatch):
    _with_training(monkeypatch, refit_for_serving=False)
    parts = _parts(tasks)
    assert parts.train.tolist() == list(range(160))
    assert parts.val.tolist() == list(range(160, 180))
    assert parts.test.tolist() == list(range(180, 200))


def test_tasks_created_together_stay_on_one_side_of_the_cut(tasks):
    """Production's tie rule: the cut at 180 falls in a burst (rows 175-184 share
    a creation time) and moves to its start, so no burst is split between the
    trees and the validation part."""
    created = tasks["creationdate"].to_numpy().copy()
    created[175:185] = created[175]
    parts = _parts(tasks.assign(creationdate=created))
    assert sorted(parts.train.tolist()) == list(range(175))
    assert parts.val.tolist() == list(range(175, 200))


def test_only_tasks_whose_labels_were_known_before_the_period_are_in_the_window(
    tasks,
):
    boundary = np.datetime64(tasks["labels_known_at"].iloc[150])
    window = _known_window(tasks, boundary, WalkForwardConfig())
    assert len(window) == 150
    capped = _known_window(tasks, boundary, WalkForwardConfig(max_train_rows=100))
    assert capped["creationdate"].tolist() == tasks["creationdate"][50:150].tolist()


def test_a_window_that_cannot_be_split_in_time_keeps_its_scouts(tasks, caplog):
    """One creation time for every task: no part can be cut off. The period is
    reported (its tasks keep their scouts), the benchmark goes on."""
    same = tasks.assign(creationdate=tasks["creationdate"].iloc[0])
    retraining, cadence = _retrain_at(BOUNDARY, same, BINS, WalkForwardConfig())
    assert retraining.result is None and cadence is None
    assert len(retraining.window) == 200
    assert "cannot be split by creation time" in caplog.text
