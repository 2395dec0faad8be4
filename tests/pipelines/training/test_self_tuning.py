"""Self-tuning: each retraining chooses its training window and the next cadence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.bins_file import load_bins
from pipelines.training.config import TrainingConfig
from pipelines.training.dataset import LabelledHistory
from pipelines.training.self_tuning import (
    CADENCE_TOLERANCE,
    HALF_LIFE_CANDIDATES,
    choose_cadence,
    choose_half_life,
    decay_lower_bound,
)
from pipelines.training.train import train


def test_the_best_half_life_wins_and_a_near_tie_goes_to_the_longer():
    assert choose_half_life({30.0: 0.70, 180.0: 0.60, None: 0.50}) == 30.0
    assert choose_half_life({30.0: 0.701, 180.0: 0.700, None: 0.600}) == 180.0
    assert choose_half_life({30.0: 0.700, 180.0: 0.650, None: 0.699}) is None
    with pytest.raises(ValueError, match="'scores' field"):
        choose_half_life({})


def test_the_decay_is_the_slope_and_its_bound_is_below_it():
    rng = np.random.default_rng(0)
    age = rng.uniform(0, 60, 4000)
    correct = (rng.uniform(size=age.size) < 0.9 - 0.005 * age).astype(float)
    fitted, bound = decay_lower_bound(age, correct)
    assert fitted == pytest.approx(0.005, abs=0.001)
    assert 0 < bound < fitted
    assert decay_lower_bound(np.array([1.0, 1.0, 1.0]), np.ones(3)) == (0.0, 0.0)


def test_a_fast_ageing_model_is_retrained_weekly_and_a_steady_one_quarterly():
    rng = np.random.default_rng(1)
    age = rng.uniform(0, 30, 5000)
    steep = (rng.uniform(size=age.size) < 0.9 - 0.002 * age).astype(float)
    flat = (rng.uniform(size=age.size) < 0.8).astype(float)
    fast = choose_cadence(age, steep, tasks_per_day=1000)
    assert fast.days == 7
    assert fast.loss_per_day * 7 / 2 <= CADENCE_TOLERANCE
    assert "cost at most" in fast.reason
    steady = choose_cadence(age, flat, tasks_per_day=1000)
    assert steady.days == 91 and steady.loss_per_day == 0
    # A bound of zero reads as what it is, not as "falls by at least 0.0000".
    assert steady.reason.startswith("no fall of accuracy with model age stands out")
    assert steady.reason.endswith("the longest cadence, 91 days")


def test_a_cadence_that_brings_too_few_new_tasks_is_not_chosen():
    rng = np.random.default_rng(2)
    age = rng.uniform(0, 30, 5000)
    steep = (rng.uniform(size=age.size) < 0.9 - 0.004 * age).astype(float)
    slow_site = choose_cadence(age, steep, tasks_per_day=20, min_tasks=500)
    assert slow_site.days == 30  # 7 days bring 140 tasks, 30 bring 600
    assert "new tasks" in slow_site.reason


def _drifting_history(labelled_history: LabelledHistory) -> LabelledHistory:
    """Return the history with its ramcount labels turned around in its newest half.

    Old tasks then teach the opposite of what new ones need: only a short
    half-life can learn the newest behaviour.
    """
    frame = labelled_history.frame.copy()
    order = np.argsort(frame["creationdate"].to_numpy())
    newer = np.zeros(len(frame), dtype=bool)
    newer[order[len(order) // 2 :]] = True
    ram = frame["ramcount"].to_numpy(dtype=float)
    high, low = np.nanmax(ram), np.nanmin(ram)
    frame.loc[newer, "ramcount"] = high + low - ram[newer]
    return LabelledHistory(frame)


def test_training_chooses_a_half_life_per_target_and_records_the_cadence(
    labelled_history,
):
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30})
    result = train(_drifting_history(labelled_history), load_bins(), config)
    chosen = result.split_info["half_life_days"]
    assert set(chosen) == {"ramcount", "cputime", "iointensity", "walltime"}
    assert all(h in HALF_LIFE_CANDIDATES for h in chosen.values())
    # Turned-around labels: weighing the old half as much as the new one loses.
    assert chosen["ramcount"] is not None
    scores = result.kinds["xgboost"].half_life_scores["ramcount"]
    assert scores[str(chosen["ramcount"])] > scores["None"]
    assert result.bundle.info["retrain_every_days"] in (7, 30, 91)
    assert result.split_info["cadence"]["n_tasks"] > 0


def test_a_fixed_half_life_is_used_as_given(labelled_history):
    config = TrainingConfig(
        model_kinds=("xgboost",), xgboost={"n_estimators": 10}, half_life_days=45.0
    )
    result = train(labelled_history, load_bins(), config)
    assert set(result.split_info["half_life_days"].values()) == {45.0}
    bad = TrainingConfig(model_kinds=("xgboost",), half_life_days="sometimes")
    with pytest.raises(ValueError, match="'half_life_days' field must be"):
        train(labelled_history, load_bins(), bad)


def test_the_time_of_the_validation_tasks_is_what_ages(labelled_history):
    """Age is counted from the newest training task, never negative."""
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 10})
    result = train(labelled_history, load_bins(), config)
    cadence = result.split_info["cadence"]
    created = pd.to_datetime(labelled_history.frame["creationdate"])
    span = (created.max() - created.min()) / pd.Timedelta(days=1)
    assert 0 <= cadence["observed_days"] <= span
