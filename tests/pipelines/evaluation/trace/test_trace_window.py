"""Each benchmark retraining fits on the split a production retraining registers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from pipelines.evaluation.trace.log_walk import WalkForwardConfig, _window

BOUNDARY = np.datetime64("2030-01-01")


@pytest.fixture
def tasks() -> pd.DataFrame:
    known = pd.date_range("2020-01-01", periods=200, freq="h")
    return pd.DataFrame({"labels_known_at": known})


def _with_training(monkeypatch, **change):
    base = WalkForwardConfig().training_config()
    monkeypatch.setattr(
        WalkForwardConfig, "training_config", lambda self: replace(base, **change)
    )


def test_training_yaml_gives_the_older_90_percent_to_the_trees(tasks):
    _, parts = _window(tasks, BOUNDARY, WalkForwardConfig())
    assert parts.train.tolist() == list(range(180))
    assert parts.val.tolist() == parts.test.tolist() == list(range(180, 200))


def test_another_split_in_training_yaml_moves_the_benchmark_with_it(tasks, monkeypatch):
    _with_training(
        monkeypatch, train_fraction=0.7, val_fraction=0.15, test_fraction=0.15
    )
    _, parts = _window(tasks, BOUNDARY, WalkForwardConfig())
    assert parts.train.tolist() == list(range(170))
    assert parts.val.tolist() == parts.test.tolist() == list(range(170, 200))


def test_without_the_refit_the_benchmark_fits_the_gated_split(tasks, monkeypatch):
    _with_training(monkeypatch, refit_for_serving=False)
    _, parts = _window(tasks, BOUNDARY, WalkForwardConfig())
    assert parts.train.tolist() == list(range(160))
    assert parts.val.tolist() == list(range(160, 180))
    assert parts.test.tolist() == list(range(180, 200))
