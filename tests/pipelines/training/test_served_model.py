"""The model a training registers: the gated configuration fitted one part later."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from panda_predictor.bins_file import load_bins
from panda_predictor.core.assess.splits import TimeSplit
from pipelines.training.config import TrainingConfig
from pipelines.training.train import (
    served_model,
    serving_parts,
    train,
    training_parts,
)

XGBOOST = TrainingConfig(
    model_kinds=("xgboost",), half_life_days=None, xgboost={"n_estimators": 30}
)


def _end(period: str) -> pd.Timestamp:
    return pd.Timestamp(period.split(" .. ")[1])


def _start(period: str) -> pd.Timestamp:
    return pd.Timestamp(period.split(" .. ")[0])


@pytest.fixture(scope="module")
def gated_and_served(labelled_history):
    bins = load_bins()
    parts = training_parts(labelled_history, bins, XGBOOST)
    gated = train(labelled_history, bins, XGBOOST, parts)
    served = served_model(labelled_history, bins, XGBOOST, parts, gated)
    return parts, gated, served


def test_serving_parts_move_each_part_one_on():
    parts = TimeSplit(np.array([0, 1, 2]), np.array([3, 4]), np.array([5, 6]))
    served = serving_parts(parts)
    assert served.train.tolist() == [0, 1, 2, 3, 4]
    assert served.val.tolist() == served.test.tolist() == [5, 6]


def test_the_served_trees_fit_what_the_gated_ones_were_validated_on(gated_and_served):
    parts, gated, served = gated_and_served
    assert gated.split_info["train_rows"] == len(parts.train)
    assert served.split_info["train_rows"] == len(parts.train) + len(parts.val)
    assert served.split_info["val_rows"] == len(parts.test)
    # Its trees reach the gate's test part, and no further.
    served_end = _end(served.split_info["train_period"])
    assert served_end > _end(gated.split_info["train_period"])
    assert served_end <= _start(gated.split_info["test_period"])


def test_the_served_model_carries_the_gated_models_held_out_figures(gated_and_served):
    _, gated, served = gated_and_served
    assert served.bundle is not gated.bundle
    assert served.bundle.metrics == gated.bundle.metrics
    assert served.bundle.info["metrics_test_period"] == gated.split_info["test_period"]
    # Its own test part is its validation part, the gate's test part.
    assert served.split_info["test_period"] == gated.split_info["test_period"]
    assert served.split_info["test_rows"] == gated.split_info["test_rows"]


@pytest.mark.parametrize(
    "change", [{"refit_for_serving": False}, {"split": "stratified"}]
)
def test_without_the_refit_or_a_newest_test_part_the_gated_model_is_served(
    gated_and_served, labelled_history, change
):
    parts, gated, _ = gated_and_served
    config = replace(XGBOOST, **change)
    assert served_model(labelled_history, load_bins(), config, parts, gated) is gated
