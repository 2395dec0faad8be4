"""Measure single-row ``predict_proba`` latency of both classifier kinds.

Run ``python -m panda_predictor.models.latency`` (options: ``--rows``, ``--calls``);
it trains small models on synthetic tasks and prints p50/p99 in milliseconds. The
synthetic generator is shared with the tests so both exercise the same data shape.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from .base import UNKNOWN_CATEGORY

#: Categories of the synthetic "processingtype" feature (the first one is reserved).
PROCESSING_TYPES = [UNKNOWN_CATEGORY, "deriv", "merge", "simul", "recon", "evgen"]
#: Categories of the synthetic "framework" feature.
FRAMEWORKS = [UNKNOWN_CATEGORY, "Athena", "AthDerivation", "AthGeneration"]


def make_synthetic_tasks(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Return time-ordered synthetic task features and a 4-bin label.

    The bin depends on a categorical and a numeric feature: class 0/1 by processing
    type, class 2 for large inputs, and a rare class 3 (about 6 %) that overlaps the
    others, so only class weighting recovers much of it.
    """
    rng = np.random.default_rng(seed)
    ptype = rng.choice(PROCESSING_TYPES[1:], n, p=[0.35, 0.25, 0.2, 0.15, 0.05])
    framework = rng.choice(FRAMEWORKS[1:], n)
    log_events = rng.normal(10.0, 2.0, n)
    corecount = rng.choice([1.0, 8.0], n, p=[0.4, 0.6])
    noise = rng.normal(0.0, 0.7, n)
    label = np.where(np.isin(ptype, ["deriv", "merge"]), 0, 1)
    label = np.where(log_events + noise > 12.0, 2, label)
    rare_score = (ptype == "recon") * 1.5 + (corecount == 8.0) * 0.5 + noise
    label = np.where(rare_score > 1.9, 3, label)
    X = pd.DataFrame(
        {
            "processingtype": pd.Categorical(ptype, categories=PROCESSING_TYPES),
            "framework": pd.Categorical(framework, categories=FRAMEWORKS),
            "log_nevents": log_events.astype(np.float32),
            "corecount": corecount.astype(np.float32),
        }
    )
    # Some tasks have no event count yet at refine time.
    X.loc[rng.random(n) < 0.1, "log_nevents"] = np.nan
    return X, label.astype(np.int64)


def measure(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """Return (p50, p99) in milliseconds of ``calls`` calls of ``fn`` after warm-up."""
    for _ in range(10):
        fn()
    times = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - start
    p50, p99 = np.percentile(times, [50, 99]) * 1000.0
    return float(p50), float(p99)


def main(argv: list[str] | None = None) -> None:
    """Train both kinds on synthetic tasks and print single-row latency figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--rows",
        type=int,
        default=5000,
        help="synthetic tasks both models are trained on (default: %(default)s)",
    )
    parser.add_argument(
        "--calls",
        type=int,
        default=500,
        help="timed single-row calls per model (Keras Model.predict: at most 100) "
        "(default: %(default)s)",
    )
    args = parser.parse_args(argv)

    from .keras_net import KerasResourceClassifier
    from .xgb import XGBoostResourceClassifier

    X, y = make_synthetic_tasks(args.rows, seed=0)
    one = X.iloc[[0]]
    xgb_model = XGBoostResourceClassifier(4, n_estimators=400).fit(X, y)
    keras_model = KerasResourceClassifier(4, epochs=5).fit(X, y)
    inputs = keras_model._inputs(keras_model._align(one))
    rows = [
        (
            "xgboost predict_proba (inplace_predict)",
            lambda: xgb_model.predict_proba(one),
        ),
        ("keras predict_proba (numpy forward)", lambda: keras_model.predict_proba(one)),
        (
            "keras Model.predict (for comparison)",
            lambda: keras_model.model_.predict(inputs, verbose=0),
        ),
    ]
    print(f"single-row latency over {args.calls} calls, ms (p50 / p99)")
    for name, fn in rows:
        calls = args.calls if "Model.predict" not in name else min(args.calls, 100)
        p50, p99 = measure(fn, calls)
        print(f"  {name:42s} {p50:7.3f} / {p99:7.3f}")


if __name__ == "__main__":
    main()
