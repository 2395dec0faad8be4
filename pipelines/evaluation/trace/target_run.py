"""What one target collects over a job log's walk forward, and how it is filled.

Per target, a :class:`TargetRun` holds the test rows whose label is known and, per
predictor (the production row, the model alone, each baseline, each calibration
method), what it predicted for them. :mod:`pipelines.evaluation.trace.log_walk`
fills the production rows period by period; the baselines (the field's recency
rules and the user's request, from the same history features) are gathered here,
and rows of periods that had no model are dropped at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.assess import baselines as bl
from panda_predictor.core.bins import TargetBins
from panda_predictor.core.decide.calibration import METHODS
from panda_predictor.core.decide.recency_rules import rule_values

#: The request column of the job frame a target's use is compared with.
REQUEST_OF: dict[str, str] = {
    "walltime": "req_time_s",
    "cputime": "req_time_s",
    "ramcount": "req_memory_mb",
    # No log records an I/O request: the Nextflow reader's column is all NaN, so
    # iointensity has no request baseline (and no replay, see replay.RESOURCE).
    "iointensity": "req_io_kbps",
}
#: Margin of the percentile baselines (the field's rule: 75th/95th + 10 %).
BASELINE_MARGIN = 0.10
#: The row of the tables that is what the hook writes.
PRODUCTION = "model:production"


@dataclass
class TargetRun:
    """Predictions of the production predictor and the baselines for one target."""

    target: str
    bins: TargetBins
    rows: np.ndarray
    y_true: np.ndarray
    actual: np.ndarray
    predicted: dict[str, np.ndarray] = field(default_factory=dict)
    raw: dict[str, np.ndarray] = field(default_factory=dict)
    confidence: dict[str, np.ndarray] = field(default_factory=dict)
    applied: dict[str, np.ndarray] = field(default_factory=dict)
    #: Per row, the concrete value a strategy writes (trace unit), where it is not
    #: its class's value: the production decision's cost choice.
    values: dict[str, np.ndarray] = field(default_factory=dict)
    #: Per row, whether a strategy wrote its value ``...Fixed`` (PanDA does not
    #: re-measure it): the production decision, where its retraining chose so.
    fixed: dict[str, np.ndarray] = field(default_factory=dict)
    #: Per row, whether the hook asks PanDA to re-measure the row's task once its
    #: first 3 jobs are settled (the production decision's ``early_remeasure``).
    early: dict[str, np.ndarray] = field(default_factory=dict)
    followed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    combination: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per row (n x K) the production's calibrated served distribution and, per
    #: ``calibration:<method>``, the same distribution calibrated by that method
    #: fitted on the retraining's validation part (for the method comparison).
    distribution: dict[str, np.ndarray] = field(default_factory=dict)


def new_target_run(
    tasks: pd.DataFrame, target: str, bins: TargetBins, test_part: np.ndarray
) -> TargetRun:
    """Return ``target``'s run over its labelled test rows, nothing predicted yet."""
    values = tasks[target].to_numpy(dtype=float)
    rows = np.sort(test_part[np.isfinite(values[test_part])])
    run = TargetRun(target, bins, rows, bins.assign(values[rows]), values[rows])
    for name in (PRODUCTION, "model:xgboost"):
        run.predicted[name] = np.full(rows.size, -1)
        run.confidence[name] = np.zeros(rows.size)
        run.applied[name] = np.zeros(rows.size, dtype=bool)
    run.values[PRODUCTION] = np.full(rows.size, np.nan)
    run.fixed[PRODUCTION] = np.zeros(rows.size, dtype=bool)
    run.early[PRODUCTION] = np.zeros(rows.size, dtype=bool)
    run.followed = np.full(rows.size, -1)
    for name in (PRODUCTION, *(f"calibration:{m}" for m in METHODS)):
        run.distribution[name] = np.zeros((rows.size, bins.n_classes))
    return run


def baseline_values(
    jobs: pd.DataFrame,
    X: pd.DataFrame,
    target: str,
    fallback: float,
    has_request: bool | None = None,
) -> dict[str, np.ndarray]:
    """Return each baseline's value for the test tasks, from the production features.

    The recency rules are the combination's experts (same history features); a
    task without the needed history falls back to its request, then to
    ``fallback`` (the training median), so every task gets a prediction.
    ``has_request`` says whether the *log* records requests (default: whether
    these jobs do); it must be the log's, so that every period yields the same
    baselines (a period without a single request still gets the request rows,
    which then fall back like any task without one).
    """
    request = jobs[REQUEST_OF[target]].to_numpy(dtype=float)
    default = bl.request_baseline(request, fallback)
    rules = rule_values(X, target, margin=BASELINE_MARGIN)
    if has_request is None:
        has_request = bool(np.isfinite(request).any())
    names = {"last2": "user_last2_mean", "key_p75": "key_p75", "key_p95": "key_p95"}
    if has_request:
        names["ratio"] = "user_max5_ratio"
    out = {"baseline:request": default} if has_request else {}
    for rule, name in names.items():
        out[f"baseline:{name}"] = bl.with_fallback(rules[rule], default)
    return out


def fill_baselines(
    run: TargetRun,
    parts: list[tuple[np.ndarray, dict[str, np.ndarray]]],
    tasks: pd.DataFrame,
    train_part: np.ndarray,
) -> None:
    """Gather the baselines' per-period values into the run's rows (majority too).

    Rows of a period without a model keep class -1 for every row, so the tables
    stay comparable: such tasks keep their scouts in production.
    """
    train_classes = run.bins.assign(tasks[run.target].to_numpy(dtype=float)[train_part])
    run.predicted["baseline:majority"] = bl.majority_class(train_classes, run.rows.size)
    for here, values in parts:
        for name, raw in values.items():
            if name not in run.raw:
                run.raw[name] = np.full(run.rows.size, np.nan)
                run.predicted[name] = np.full(run.rows.size, -1)
            run.raw[name][here] = raw
            run.predicted[name][here] = run.bins.assign(raw)


def drop_unpredicted(run: TargetRun) -> None:
    """Drop the rows of periods that had no model (too little finished history)."""
    keep = run.predicted[PRODUCTION] >= 0
    if keep.all():
        return
    run.rows, run.y_true, run.actual = (
        run.rows[keep],
        run.y_true[keep],
        run.actual[keep],
    )
    tables = (
        run.predicted,
        run.raw,
        run.confidence,
        run.applied,
        run.values,
        run.fixed,
        run.early,
        run.distribution,
    )
    for table in tables:
        for name in table:
            table[name] = table[name][keep]
    run.followed = run.followed[keep]
