"""Walk-forward evaluation: retrain before each month, score the month."""

from __future__ import annotations

import pandas as pd
import pytest

from panda_predictor.bins_file import load_bins
from pipelines.evaluation.champion import markdown_table
from pipelines.evaluation.monthly_walk import walk_forward, walk_forward_table
from pipelines.training.config import TrainingConfig

FAST = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 20})


def test_walk_forward_trains_on_the_past_and_scores_each_month(labelled_history):
    results = walk_forward(labelled_history, load_bins(), FAST, n_months=2)
    frame = labelled_history.frame
    months = pd.PeriodIndex(pd.DatetimeIndex(frame["creationdate"]), freq="M")
    last_two = [str(m) for m in months.unique().sort_values()[-2:]]
    assert [r.month for r in results] == last_two
    assert results[1].train_rows > results[0].train_rows
    for r in results:
        in_month = (months == pd.Period(r.month, freq="M")).sum()
        before = (months < pd.Period(r.month, freq="M")).sum()
        assert 0 < r.test_rows <= in_month
        assert r.train_rows < before  # the rest of the past validates
        assert 0 <= r.evaluation.mean_accuracy <= 1
    table = walk_forward_table(results)
    assert list(table["month"]) == last_two
    text = markdown_table(table)
    assert text.count("\n") == len(table) + 1 and "ramcount acc" in text


def test_walk_forward_needs_enough_months(labelled_history):
    with pytest.raises(ValueError, match="at least 100 months"):
        walk_forward(labelled_history, load_bins(), FAST, n_months=99)
