"""The serving benchmark's report states the prices the predictor served with."""

from __future__ import annotations

import argparse
import math

from benchmarks.bench_predict import report


def _result(prices: dict) -> dict:
    return {
        "kind": "xgboost",
        "trained_with": "XGBoost up to 200 rounds at learning rate 0.3",
        "p50_ms": 1.2,
        "p99_ms": 1.8,
        "bare_p50_ms": 0.6,
        "bare_p99_ms": 0.9,
        "frame_p50_ms": 40.0,
        "frame_p99_ms": 120.0,
        "tasks_per_s": 10_000.0,
        "tasks_per_cpu_s": 11_000.0,
        "table_tasks_per_s": 25_000.0,
        "table_tasks_per_cpu_s": 26_000.0,
        "features_share": 0.08,
        "load": (0.2, 0.4),
        "prices": prices,
        "rollout": ("predict", 1.0),
    }


def test_the_report_prints_per_target_prices_and_the_verdicts():
    """The prices, and each goal's verdict from the figures (p99, batch)."""
    args = argparse.Namespace(
        tasks=20_000,
        xgb_estimators=None,
        keras_epochs=10,
        calls=2_000,
        frame_calls=200,
        batch=100_000,
    )
    prices = {
        "delay_price": 16.0,
        "gb_per_core": 2.0,
        "target_prices": {"ramcount": 4.0, "walltime": 256.0},
        "fixed_targets": ["ramcount"],
        "scouts_value_targets": ["cputime"],
    }
    text = report([_result(prices)], args, "python benchmarks/bench_predict.py")
    assert "delay_price 16, gb_per_core 2" in text
    assert "target_prices (ramcount 4, walltime 256)" in text
    assert "fixed_targets (ramcount), scouts_value_targets (cputime)" in text
    assert "p99 <= 2 ms met (1.80 ms)" in text
    assert "> 50,000 tasks/s in a batch **not met** (25,000 on the table route" in text
    fast = {**_result(prices), "table_tasks_per_s": 60_000.0}
    assert "in a batch met (60,000" in report([fast], args, "bench")
    keras = {**_result(prices), "kind": "keras", "bare_p50_ms": math.nan}
    keras["bare_p99_ms"] = math.nan
    row = next(x for x in report([keras], args, "b").splitlines() if "| keras" in x)
    assert "| - | - |" in row and "nan" not in row
    assert "parameters (XGBoost up to 200 rounds at learning rate 0.3);" in text


def test_the_timed_booster_is_trained_with_the_production_parameters():
    """What bench_predict times is what production trains: training.yaml's trees."""
    from types import SimpleNamespace

    from benchmarks.bench_predict import bench_training_config, trained_with
    from pipelines.params import load_params

    wanted = load_params("training")["xgboost"]
    settings = SimpleNamespace(tail_recall_target=0.95, delay_price=None)
    args = argparse.Namespace(xgb_estimators=None, keras_epochs=3)
    config = bench_training_config(settings, "xgboost", args)
    assert config.model_kinds == ("xgboost",)
    assert dict(config.xgboost) == dict(wanted)
    said = trained_with(config, "xgboost")
    assert f"learning rate {wanted['learning_rate']}" in said

    capped = argparse.Namespace(xgb_estimators=7, keras_epochs=3)
    rounds = bench_training_config(settings, "xgboost", capped).xgboost
    assert rounds["n_estimators"] == 7
    assert rounds["max_depth"] == wanted["max_depth"]
    keras = bench_training_config(settings, "keras", capped)
    assert keras.keras["epochs"] == 3
    assert trained_with(keras, "keras") == "Keras 3 epochs"
