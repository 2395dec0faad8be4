"""Walk forward through a trace's newest part, retraining before each test month.

The oldest ``1 - test_fraction`` of the jobs (by submit time) fit the bins; the
newest part is tested month by month. Before each month the models are retrained on
every job that had *finished* before the month's first submission (a job still
running has no label yet), as production retraining would. Baselines predict the
same test jobs from the same finished-before-submission history.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from panda_predictor.core import baselines as bl
from panda_predictor.core.bins import TargetBins, fit_bins
from panda_predictor.core.splits import time_ordered_split
from panda_predictor.ingest.swf import TRACE_TARGETS
from pipelines.trace.features import TraceFeatures, baseline_values, build_features

logger = logging.getLogger(__name__)

#: Classes per trace target (quantile bins of the training part).
TRACE_N_CLASSES = {"walltime": 5, "cputime": 4, "ramcount": 4}


@dataclass
class WalkForwardConfig:
    """Knobs of one benchmark run."""

    test_fraction: float = 0.2
    models: tuple[str, ...] = ("xgboost",)
    max_train_rows: int = 40000
    max_months: int | None = None
    n_estimators: int = 300
    seed: int = 0


@dataclass
class TargetRun:
    """Predictions of every model and baseline for one target's test jobs."""

    target: str
    bins: TargetBins
    rows: np.ndarray
    y_true: np.ndarray
    actual: np.ndarray
    predicted: dict[str, np.ndarray] = field(default_factory=dict)
    raw: dict[str, np.ndarray] = field(default_factory=dict)
    confidence: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class WalkForwardResult:
    """Everything a benchmark run produced, before scoring."""

    split: dict[str, object]
    runs: dict[str, TargetRun]
    features: TraceFeatures
    warnings: list[str]


def fit_trace_bins(
    values: dict[str, np.ndarray],
) -> tuple[dict[str, TargetBins], list[str]]:
    """Quantile-fit bins per target on training values; return them and any warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = fit_bins(
            values,
            n_classes={t: TRACE_N_CLASSES[t] for t in values},
            fixed_edges={},
            version="trace",
        )
    bins = {t: replace(fitted[t], unit=TRACE_TARGETS[t][1], labels=()) for t in values}
    return bins, [str(w.message) for w in caught]


def _model(kind: str, n_classes: int, config: WalkForwardConfig):  # noqa: ANN202
    from panda_predictor.models import model_class

    if kind == "xgboost":
        return model_class(kind)(
            n_classes=n_classes,
            n_estimators=config.n_estimators,
            max_depth=6,
            random_state=config.seed,
        )
    return model_class(kind)(n_classes=n_classes, epochs=15, random_state=config.seed)


def run_walk_forward(
    frame: pd.DataFrame, targets: list[str], config: WalkForwardConfig
) -> WalkForwardResult:
    """Run models and baselines over the test part of ``frame`` (see module doc)."""
    f = config.test_fraction
    split = time_ordered_split(frame["submit_s"].to_numpy(), 1.0 - f, 0.0, f)
    train_part, test_part = np.sort(split.train), np.sort(split.test)
    features = build_features(frame, targets)
    submit = frame["submit_s"].to_numpy(dtype=float)
    finish = frame["finish_s"].to_numpy(dtype=float)
    values = {t: frame[TRACE_TARGETS[t][0]].to_numpy(dtype=float) for t in targets}
    bins, notes = fit_trace_bins({t: values[t][train_part] for t in targets})
    months = frame["submit_time"].iloc[test_part].dt.to_period("M").astype(str)
    month_names = list(dict.fromkeys(months))
    if config.max_months is not None:
        month_names = month_names[: config.max_months]
    runs: dict[str, TargetRun] = {}
    for target in targets:
        rows = test_part[np.isin(months.to_numpy(), month_names)]
        rows = rows[np.isfinite(values[target][rows])]
        tb = bins[target]
        runs[target] = TargetRun(
            target, tb, rows, tb.assign(values[target][rows]), values[target][rows]
        )
        median = float(np.nanmedian(values[target][train_part]))
        for name, pred in baseline_values(frame, features, target, median).items():
            runs[target].raw[name] = pred[rows]
            runs[target].predicted[name] = tb.assign(pred[rows])
        train_classes = tb.assign(values[target][train_part])
        runs[target].predicted["baseline:majority"] = bl.majority_class(
            train_classes, rows.size
        )
        for kind in config.models:
            runs[target].predicted[f"model:{kind}"] = np.full(rows.size, -1)
            runs[target].confidence[f"model:{kind}"] = np.zeros(rows.size)
    test_months = months.to_numpy()
    for month in month_names:
        in_month = test_part[test_months == month]
        boundary = float(submit[in_month].min())
        past = np.flatnonzero(finish < boundary)
        for target in targets:
            run = runs[target]
            here = np.isin(run.rows, in_month)
            if not here.any():
                continue
            train = past[np.isfinite(values[target][past])]
            train = train[-config.max_train_rows :]
            y = run.bins.assign(values[target][train])
            n_val = max(1, train.size // 10)
            for kind in config.models:
                name = f"model:{kind}"
                started = time.perf_counter()
                model = _model(kind, run.bins.n_classes, config)
                X = features.X
                model.fit(
                    X.iloc[train[:-n_val]],
                    y[:-n_val],
                    X_val=X.iloc[train[-n_val:]],
                    y_val=y[-n_val:],
                )
                proba = model.predict_proba(X.iloc[run.rows[here]])
                run.predicted[name][here] = np.argmax(proba, axis=1)
                run.confidence[name][here] = proba.max(axis=1)
                logger.info(
                    "trace %s %s %s: trained on %d jobs in %.1f s",
                    target,
                    month,
                    kind,
                    train.size,
                    time.perf_counter() - started,
                )
    split_info: dict[str, object] = {
        "method": "time_ordered_walk_forward",
        "test_fraction": f,
        "n_jobs": int(len(frame)),
        "n_train": int(train_part.size),
        "n_test": int(test_part.size),
        "test_months": month_names,
        "train_end": str(frame["submit_time"].iloc[train_part].max()),
        "test_start": str(frame["submit_time"].iloc[test_part].min()),
        "max_train_rows": config.max_train_rows,
    }
    return WalkForwardResult(split_info, runs, features, notes)
