"""Safety-aware class choice, capped categoricals and the goal checks of the traces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.ingest.swf import read_swf
from pipelines.trace import walk_forward as wf
from pipelines.trace.features import OTHER_CATEGORY, build_features
from pipelines.trace.safety import allocation, choose_level, cumulative_class
from pipelines.trace.scoring import goal_summary
from tests.test_trace_benchmark import write_trace

PROBA = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.2, 0.2, 0.6]])


@pytest.mark.parametrize(
    ("level", "expected"),
    [(0.3, [0, 2, 1]), (0.5, [0, 2, 2]), (0.8, [1, 2, 2]), (1.0, [2, 2, 2])],
    ids=["low", "median", "high", "all"],
)
def test_cumulative_class_picks_the_smallest_class_reaching_the_level(level, expected):
    assert cumulative_class(PROBA, level).tolist() == expected


@pytest.mark.parametrize(
    ("proba", "level", "match"),
    [
        (np.ones(3), 0.5, "must be an \\(n, K\\) array"),
        (PROBA, 0.0, "The 'level' field must be in \\(0, 1\\]"),
        (PROBA, 1.5, "The 'level' field must be in \\(0, 1\\]"),
    ],
    ids=["1-d", "zero-level", "above-one"],
)
def test_cumulative_class_errors(proba, level, match):
    with pytest.raises(ValueError, match=match):
        cumulative_class(proba, level)


def test_allocation_by_hand():
    under, over = allocation([0, 2], [1, 1], [10.0, 20.0, 40.0], [15.0, 15.0])
    assert under == 0.5 and over == pytest.approx((0.0 + 25.0) / 2)


def test_choose_level_prefers_the_safest_level_that_keeps_the_goal():
    # Truth is class 1 for every job; the model leans to class 0 (arg-max wrong),
    # a baseline always says 2 (never under, large over).
    n = 40
    proba = np.tile([0.45, 0.40, 0.15], (n, 1))
    y = np.ones(n, dtype=int)
    actual = np.full(n, 15.0)
    values = np.array([10.0, 20.0, 40.0])
    choice = choose_level(proba, y, actual, values, {"baseline:big": np.full(n, 2)})
    # 0.3 -> class 0 (all under); 0.5..0.85 -> class 1 (right, no under); higher
    # levels -> class 2. The safest level that keeps F1 above the baseline's.
    assert choice.level == 0.5
    assert choice.under_allocation == 0.0 and not choice.dominated_by


def test_safety_level_is_tuned_on_finished_jobs_only(tmp_path, seed, monkeypatch):
    """The level is tuned on jobs that finished before the test month, never on it."""
    frame, _ = read_swf(write_trace(tmp_path / "t.swf", seed, n=600))
    calls: list[int] = []
    real_choose, real_model = wf.choose_level, wf._model

    def spy_choose(*args, **kwargs):
        calls.append(len(args[1]))
        return real_choose(*args, **kwargs)

    asked: list[np.ndarray] = []

    def spy_model(kind, n_classes, config):
        inner = real_model(kind, n_classes, config)
        proba = inner.predict_proba

        def recorded(X):
            asked.append(X.index.to_numpy())
            return proba(X)

        inner.predict_proba = recorded
        return inner

    monkeypatch.setattr(wf, "choose_level", spy_choose)
    monkeypatch.setattr(wf, "_model", spy_model)
    result = wf.run_walk_forward(
        frame, ["walltime"], wf.WalkForwardConfig(n_estimators=10)
    )
    run = result.runs["walltime"]
    months = result.split["test_periods"]
    assert len(calls) == len(months) >= 2  # one choice per monthly retraining
    finish = frame["finish_s"].to_numpy()
    submit = frame["submit_s"].to_numpy()
    # Per retraining: first the month's test rows, then the validation rows (older
    # months' test jobs may be among them once finished, as in production).
    assert len(asked) == 2 * len(months)
    for test_rows, val_rows in zip(asked[::2], asked[1::2], strict=True):
        assert np.isin(test_rows, run.rows).all()
        assert not np.isin(val_rows, test_rows).any()
        assert finish[val_rows].max() < submit[test_rows].min()
    assert (run.predicted["model:xgboost_safe"] >= 0).all()
    assert set(run.levels["model:xgboost_safe"]) == set(months)


def test_build_features_caps_categories_on_the_fit_rows_only():
    frame = pd.DataFrame(
        {
            "submit_s": np.arange(8.0),
            "finish_s": np.arange(8.0) + 0.5,
            "user": ["a", "a", "a", "b", "b", "c", "d", "d"],
            "group": [None] * 8,
            "executable": ["x"] * 8,
            "queue": [None] * 8,
            "partition": [None] * 8,
            "req_procs": np.ones(8),
            "req_time_s": np.full(8, 10.0),
            "req_memory_mb": np.full(8, np.nan),
            "run_s": np.ones(8),
            "submit_time": pd.to_datetime(np.arange(8), unit="h"),
        }
    )
    X = build_features(frame, ["walltime"], fit_rows=np.arange(5), max_categories=1).X
    # Only 'a' (most frequent among the first five rows) is kept; 'd', frequent
    # only in the later rows, is not.
    assert X["user"].tolist() == ["a"] * 3 + [OTHER_CATEGORY] * 5
    with pytest.raises(ValueError, match="The 'max_categories' field must be"):
        build_features(frame, ["walltime"], max_categories=0)


def _s(f1, under, over):
    return {"macro_f1": f1, "under_allocation": under, "over_allocation": over}


def test_goal_summary_reports_each_check():
    scores = {
        "model:xgboost": _s(0.6, 0.10, 100.0),
        "model:xgboost_safe": _s(0.58, 0.05, 90.0),
        "baseline:ratio": _s(0.55, 0.07, 95.0),
        "baseline:request": _s(0.30, 0.0, 500.0),
    }
    goal = goal_summary(scores)
    assert goal["best_model"] == "model:xgboost" and goal["macro_f1_met"]
    assert goal["rows"]["model:xgboost"]["dominated_by"] == ["baseline:ratio"]
    assert goal["allocation_met"] and goal["both_met_by"] == ["model:xgboost_safe"]
    scores["baseline:ratio"] = _s(0.65, 0.01, 10.0)
    goal = goal_summary(scores)
    assert not goal["macro_f1_met"] and not goal["allocation_met"]
    assert goal["both_met_by"] == []


@pytest.mark.parametrize("validation", ["random", "newest"], ids=["random", "newest"])
def test_hold_out_keeps_the_newest_tenth_for_the_level(validation):
    train = np.arange(100, 300)
    fit, stop, level = wf._hold_out(train, wf.WalkForwardConfig(validation=validation))
    assert level.tolist() == list(range(280, 300))  # newest tenth, never fitted on
    assert not np.isin(fit, level).any() and not np.isin(fit, stop).any()
    assert stop.size == 20 and fit.size + stop.size + level.size >= 180
    if validation == "random":
        assert not np.isin(stop, level).any() and stop.min() < 280
    else:
        assert stop.tolist() == level.tolist()


def test_hold_out_rejects_an_unknown_validation():
    with pytest.raises(ValueError, match="The 'validation' field must be 'newest'"):
        wf._hold_out(np.arange(50), wf.WalkForwardConfig(validation="oldest"))
