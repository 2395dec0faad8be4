"""No log fails: a predictor or period that yields no class is reported, not fatal.

A grid log that is not in shared/ recorded requests only from some day on, so the
request baselines existed in some test periods and not in others; their rows of
the other periods stayed at class -1 and the scoring raised "must hold
non-negative integer classes".
"""

from __future__ import annotations

import math

import numpy as np

from panda_predictor.core.bins import TargetBins
from pipelines.evaluation.trace.benchmark import run_benchmark
from pipelines.evaluation.trace.log_walk import WalkForwardConfig
from pipelines.evaluation.trace.scoring import score_predictions, score_run
from pipelines.evaluation.trace.target_run import TargetRun


def write_late_request_trace(path, seed, n=600):
    """Write an SWF log whose jobs record a request only in the last quarter."""
    rng = np.random.default_rng(seed)
    lines = ["; UnixStartTime: 820454400", "; Note: synthetic"]
    t = 0.0
    for i in range(1, n + 1):
        t += rng.exponential(4 * 3600)
        user = int(rng.integers(0, 4))
        run = float(np.exp(rng.normal(5 + 1.5 * user, 0.4)))
        req = int(run * rng.uniform(1.5, 4)) if i > 0.9 * n else -1
        lines.append(
            f"{i} {int(t)} 60 {int(run)} 2 {int(run * 0.9)} -1 2 {req} "
            f"-1 1 {user} 1 {user + 10} 1 1 -1 -1"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_log_whose_requests_start_mid_test_part_is_benchmarked(tmp_path, seed):
    path = write_late_request_trace(tmp_path / "late.swf", seed)
    config = WalkForwardConfig(n_estimators=10, test_fraction=0.3, cadence="week")
    result = run_benchmark(path, config)
    scores = result.scores["walltime"]
    assert "baseline:request" in scores
    # Every period yields the request baseline (falling back where a job has no
    # request), so no row is left without a class.
    assert all(s["n_unpredicted"] == 0 for s in scores.values())
    assert len(result.split["test_periods"]) > 1


def test_rows_without_a_class_are_counted_not_scored():
    bins = TargetBins("walltime", (10.0, 100.0), (9.0, 90.0, 900.0))
    actual = np.array([5.0, 50.0, 500.0, 50.0])
    run = TargetRun("walltime", bins, np.arange(4), bins.assign(actual), actual)
    scored = score_predictions(run, np.array([0, 1, -1, -1]))
    assert scored["n_test"] == 2 and scored["n_unpredicted"] == 2
    assert scored["accuracy"] == 1.0
    nothing = score_predictions(run, np.full(4, -1))
    assert nothing["n_test"] == 0 and math.isnan(nothing["macro_f1"])
    run.predicted["model:production"] = np.array([0, 1, 2, 1])
    run.predicted["baseline:partial"] = np.array([0, -1, -1, 1])
    both = score_run(run)
    assert both["model:production"]["n_unpredicted"] == 0
    assert both["baseline:partial"]["n_test"] == 2
