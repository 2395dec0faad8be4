"""No log fails: a predictor, period or target that yields no class is reported,
not fatal.

A grid log that is not in shared/ recorded requests only from some day on, so the
request baselines existed in some test periods and not in others; their rows of
the other periods stayed at class -1 and the scoring raised "must hold
non-negative integer classes".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from panda_predictor.core.assess.splits import TimeSplit
from panda_predictor.core.bins import BinSet, TargetBins
from pipelines.evaluation.trace.benchmark import run_benchmark
from pipelines.evaluation.trace.log_walk import (
    NOT_VALIDATED,
    ONE_CLASS,
    WalkForwardConfig,
    trainable_bins,
)
from pipelines.evaluation.trace.scoring import score_predictions, score_run
from pipelines.evaluation.trace.target_run import TargetRun


def write_swf(path, seed, fields, n=600):
    """Write a synthetic SWF log of ``n`` jobs by 4 users, 4 h apart on average.

    ``fields(i, user, rng)`` gives job ``i``'s fields 4 to 10: run time,
    processors, CPU time, used memory, requested processors, time and memory.
    """
    rng = np.random.default_rng(seed)
    lines = ["; UnixStartTime: 820454400", "; Note: synthetic"]
    t = 0.0
    for i in range(1, n + 1):
        t += rng.exponential(4 * 3600)
        user = int(rng.integers(0, 4))
        lines.append(
            f"{i} {int(t)} 60 {fields(i, user, rng)} 1 {user} 1 {user + 10} 1 1 -1 -1"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def write_late_request_trace(path, seed, n=600):
    """Write an SWF log whose jobs record a request only in the last tenth."""

    def fields(i, user, rng):
        run = float(np.exp(rng.normal(5 + 1.5 * user, 0.4)))
        req = int(run * rng.uniform(1.5, 4)) if i > 0.9 * n else -1
        return f"{int(run)} 2 {int(run * 0.9)} -1 2 {req} -1"

    return write_swf(path, seed, fields, n)


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


def write_one_run_time_trace(path, seed):
    """Write an SWF log whose jobs all run 3600 s while their CPU time spreads."""

    def fields(i, user, rng):
        cpu = float(np.exp(rng.normal(4 + 1.0 * user, 0.3)))
        return f"3600 1 {int(cpu)} -1 1 7200 -1"

    return write_swf(path, seed, fields)


def test_a_target_with_one_class_is_reported_and_the_others_scored(tmp_path, seed):
    """Production refuses to train a one-class target; the benchmark must not fail
    the whole log for it (a log not in shared/ stopped at its first retraining)."""
    path = write_one_run_time_trace(tmp_path / "one.swf", seed)
    config = WalkForwardConfig(n_estimators=10, test_fraction=0.3, cadence="week")
    result = run_benchmark(path, config)
    periods = result.split["test_periods"]
    assert len(periods) > 1
    assert result.split["targets_left_out"] == {
        p: {"walltime": ONE_CLASS} for p in periods
    }
    assert "walltime" not in result.scores
    assert result.scores["cputime"]["model:production"]["n_test"] > 0
    assert "- walltime: not scored: no retraining could learn it" in result.report


def write_memory_trace(path, seed, recorded):
    """Write an SWF log whose job ``i`` records its memory only where
    ``recorded(i)``."""

    def fields(i, user, rng):
        run = float(np.exp(rng.normal(5 + 1.5 * user, 0.4)))
        mem = int(np.exp(rng.normal(10 + user, 0.3))) if recorded(i) else -1
        return f"{int(run)} 1 -1 {mem} 1 {int(run * 3)} -1"

    return write_swf(path, seed, fields)


def test_a_target_recorded_only_early_is_left_out_where_it_cannot_be_validated(
    tmp_path, seed
):
    """Memory stops being recorded before the test part: the retrainings whose
    validation part has none learn run time alone (a log not in shared/ stopped
    with "the test part must hold tasks with all four labels known")."""
    path = write_memory_trace(tmp_path / "early.swf", seed, lambda i: i < 300)
    config = WalkForwardConfig(n_estimators=10, test_fraction=0.3, cadence="week")
    result = run_benchmark(path, config)
    left_out = result.split["targets_left_out"]
    assert left_out and all(
        why == {"ramcount": NOT_VALIDATED} for why in left_out.values()
    )
    assert result.scores["walltime"]["model:production"]["n_test"] > 0
    assert "ramcount" not in result.scores


def test_a_target_recorded_only_in_the_test_part_is_not_benchmarked(tmp_path, seed):
    # Memory only from the 450th job on: none in the older 70 % (420 jobs).
    path = write_memory_trace(tmp_path / "late.swf", seed, lambda i: i >= 450)
    config = WalkForwardConfig(n_estimators=10, test_fraction=0.3, cadence="week")
    result = run_benchmark(path, config)
    assert result.split["targets_without_classes"] == ["ramcount"]
    assert "- ramcount: not benchmarked: recorded by no job" in result.report
    assert result.scores["walltime"]["model:production"]["n_test"] > 0


def test_a_window_learns_only_the_targets_with_two_classes():
    bins = BinSet(
        "t",
        {
            "walltime": TargetBins("walltime", (10.0,), (5.0, 50.0)),
            "cputime": TargetBins("cputime", (10.0,), (5.0, 50.0)),
        },
    )
    window = pd.DataFrame(
        {"walltime": [1.0, 2.0, 30.0, 3.0], "cputime": [1.0, 2.0, 3.0, 40.0]}
    )
    # The last row validates: its second class of CPU time is not training's.
    parts = TimeSplit(np.arange(3), np.array([3]), np.array([3]))
    kept, left_out = trainable_bins(window, parts, bins)
    assert list(kept.targets) == ["walltime"] and left_out == {"cputime": ONE_CLASS}
    assert kept.version == "t"


def test_targets_whose_validation_labels_never_meet_leave_the_sparser_out():
    bins = BinSet(
        "t",
        {
            "walltime": TargetBins("walltime", (10.0,), (5.0, 50.0)),
            "ramcount": TargetBins("ramcount", (10.0,), (5.0, 50.0)),
        },
    )
    nan = float("nan")
    window = pd.DataFrame(
        {
            "walltime": [1.0, 30.0, 2.0, 40.0, 3.0, nan],
            "ramcount": [1.0, 30.0, nan, nan, nan, 4.0],
        }
    )
    # Validation: run time known on two rows, memory on one, never together.
    parts = TimeSplit(np.arange(3), np.arange(3, 6), np.arange(3, 6))
    kept, left_out = trainable_bins(window, parts, bins)
    assert list(kept.targets) == ["walltime"]
    assert left_out == {"ramcount": NOT_VALIDATED}


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
