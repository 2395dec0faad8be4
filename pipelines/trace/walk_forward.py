"""Walk forward through a trace's newest part, retraining before each test period.

The oldest ``1 - test_fraction`` of the jobs (by submit time) fit the bins; the
newest part is tested period by period (a calendar month by default, the production
cadence; ``cadence="week"`` or ``"day"`` retrains more often). Before each period the
models are retrained on every job that had *finished* before the period's first
submission (a job still running has no label yet), as production retraining would.
Baselines predict the same test jobs from the same finished-before-submission history.

``development_part`` drops the test part altogether, so that design choices can be
tried on the older jobs (whose newest share then plays the test part) without the
real test part ever being looked at.

Each model gives three rows: ``model:<kind>`` (the arg-max class),
``model:<kind>_safe`` (the smallest class whose cumulative probability reaches a
level chosen each period on the newest finished jobs of the training window, see
:mod:`pipelines.trace.safety`) and ``model:<kind>_anchored`` (the model anchored to
the recency rule that did best on those same jobs, see :mod:`pipelines.trace.anchor`).
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core import baselines as bl
from panda_predictor.core.bins import TargetBins, fit_bins
from panda_predictor.core.splits import time_ordered_split
from panda_predictor.ingest.swf import TRACE_TARGETS
from pipelines.trace.anchor import ANCHOR_WEIGHT, anchored_class, choose_anchor
from pipelines.trace.features import (
    MAX_CATEGORIES,
    TraceFeatures,
    baseline_values,
    build_features,
)
from pipelines.trace.safety import choose_level, cumulative_class

logger = logging.getLogger(__name__)

#: Classes per trace target (quantile bins of the training part).
TRACE_N_CLASSES = {"walltime": 5, "cputime": 4, "ramcount": 4}

#: Retraining cadences of the walk forward and their pandas period codes.
CADENCES = {"month": "M", "week": "W", "day": "D"}


@dataclass
class WalkForwardConfig:
    """Knobs of one benchmark run."""

    test_fraction: float = 0.2
    models: tuple[str, ...] = ("xgboost",)
    max_train_rows: int = 20000
    max_periods: int | None = None
    cadence: str = "month"
    label_delay_quantile: float = 0.0
    n_estimators: int = 150
    learning_rate: float = 0.15
    early_stopping_rounds: int = 10
    max_categories: int = MAX_CATEGORIES
    safety: bool = True
    anchor_weight: float = ANCHOR_WEIGHT
    validation: str = "newest"
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
    levels: dict[str, dict[str, float]] = field(default_factory=dict)
    anchors: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class WalkForwardResult:
    """Everything a benchmark run produced, before scoring."""

    split: dict[str, object]
    runs: dict[str, TargetRun]
    features: TraceFeatures
    warnings: list[str]


def development_part(frame: pd.DataFrame, test_fraction: float) -> pd.DataFrame:
    """Return the jobs *before* the test part: the frame a design choice may see.

    The newest ``test_fraction`` of the jobs (by submit time) are dropped, so a
    walk forward over the result tests on the newest share of the training part.
    """
    split = time_ordered_split(
        frame["submit_s"].to_numpy(), 1.0 - test_fraction, 0.0, test_fraction
    )
    return frame.iloc[np.sort(split.train)].reset_index(drop=True)


def period_labels(submit_time: pd.Series, cadence: str) -> np.ndarray:
    """Return each job's retraining period (``"1997-06"`` for months, see CADENCES)."""
    if cadence not in CADENCES:
        raise ValueError(
            f"The 'cadence' field must be one of {sorted(CADENCES)}. "
            f"Got {cadence!r} instead."
        )
    return submit_time.dt.to_period(CADENCES[cadence]).astype(str).to_numpy()


def label_delay(submit: np.ndarray, finish: np.ndarray, quantile: float) -> float:
    """Return how long before a retraining a job must have been *submitted* to count.

    A job's label arrives when it finishes, so among the jobs submitted just before a
    retraining only the short ones have labels: training on "every finished job"
    over-represents short jobs exactly where the window is newest (right
    censoring). With ``quantile`` q > 0 the window stops at the
    retraining time minus the q-quantile of the training part's turnaround
    (finish minus submit), so at least a share q of the jobs submitted before that
    point had finished. 0 keeps every finished job.
    """
    q = quantile
    if not 0.0 <= q < 1.0:
        raise ValueError(
            f"The 'label_delay_quantile' field must be in [0, 1). Got {q!r} instead."
        )
    turnaround = finish - submit
    turnaround = turnaround[np.isfinite(turnaround)]
    if q == 0.0 or turnaround.size == 0:
        return 0.0
    return float(np.quantile(turnaround, q))


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


def _model(kind: str, n_classes: int, config: WalkForwardConfig) -> Any:
    """Return an unfitted classifier of ``kind`` with the benchmark's settings."""
    from panda_predictor.models import model_class

    cls: Any = model_class(kind)
    if kind == "xgboost":
        return cls(
            n_classes=n_classes,
            n_estimators=config.n_estimators,
            learning_rate=config.learning_rate,
            early_stopping_rounds=config.early_stopping_rounds,
            max_depth=6,
            random_state=config.seed,
        )
    return cls(n_classes=n_classes, epochs=15, random_state=config.seed)


def _hold_out(
    train: np.ndarray, config: WalkForwardConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split a retraining window into fit, early-stopping and level-tuning rows.

    The newest tenth of the window (jobs finished just before the test period, the
    closest to it) is held out to tune the safety level on out-of-sample
    probabilities. With ``validation="newest"`` (default) it also drives early
    stopping; with ``"random"`` early stopping watches a seeded random tenth of the
    older rows instead. The newest slice of a busy log can be one user's burst
    unlike the rest (METACENTRUM-2009-2: early stopping then kept one tree), but a
    random slice shares bursts with the fitted rows, so training runs to the round
    limit (4-10x slower) and did not close the gap there; see docs/evaluation.md.
    """
    n_val = max(1, train.size // 10)
    newest, older = train[-n_val:], train[:-n_val]
    if config.validation == "newest":
        return older, newest, newest
    if config.validation == "random":
        rng = np.random.default_rng(config.seed)
        is_stop = np.zeros(older.size, dtype=bool)
        is_stop[rng.choice(older.size, min(n_val, older.size // 2), replace=False)] = (
            True
        )
        return older[~is_stop], older[is_stop], newest
    raise ValueError(
        "The 'validation' field must be 'newest' or 'random'. "
        f"Got {config.validation!r} instead."
    )


def _model_rows(kind: str, config: WalkForwardConfig) -> list[str]:
    """Return the result rows one model kind gives (arg-max, safe, anchored)."""
    name = f"model:{kind}"
    rows = [name]
    if config.safety:
        rows.append(f"{name}_safe")
    if config.anchor_weight > 0:
        rows.append(f"{name}_anchored")
    return rows


#: Baselines that are not recency rules, so never an anchor.
_NOT_ANCHORS = ("baseline:request", "baseline:majority")


def run_walk_forward(
    frame: pd.DataFrame, targets: list[str], config: WalkForwardConfig
) -> WalkForwardResult:
    """Run models and baselines over the test part of ``frame`` (see module doc)."""
    f = config.test_fraction
    split = time_ordered_split(frame["submit_s"].to_numpy(), 1.0 - f, 0.0, f)
    train_part, test_part = np.sort(split.train), np.sort(split.test)
    features = build_features(
        frame, targets, fit_rows=train_part, max_categories=config.max_categories
    )
    submit = frame["submit_s"].to_numpy(dtype=float)
    finish = frame["finish_s"].to_numpy(dtype=float)
    delay = label_delay(
        submit[train_part], finish[train_part], config.label_delay_quantile
    )
    values = {t: frame[TRACE_TARGETS[t][0]].to_numpy(dtype=float) for t in targets}
    bins, notes = fit_trace_bins({t: values[t][train_part] for t in targets})
    test_period = period_labels(frame["submit_time"].iloc[test_part], config.cadence)
    periods = list(dict.fromkeys(test_period))
    if config.max_periods is not None:
        periods = periods[: config.max_periods]
    runs: dict[str, TargetRun] = {}
    # Baseline classes of *every* job: test rows are scored, validation rows (older,
    # finished jobs) tune the safety level.
    baseline_classes: dict[str, dict[str, np.ndarray]] = {}
    for target in targets:
        rows = test_part[np.isin(test_period, periods)]
        rows = rows[np.isfinite(values[target][rows])]
        tb = bins[target]
        runs[target] = TargetRun(
            target, tb, rows, tb.assign(values[target][rows]), values[target][rows]
        )
        median = float(np.nanmedian(values[target][train_part]))
        baseline_classes[target] = {}
        for name, pred in baseline_values(frame, features, target, median).items():
            runs[target].raw[name] = pred[rows]
            baseline_classes[target][name] = tb.assign(pred)
            runs[target].predicted[name] = baseline_classes[target][name][rows]
        train_classes = tb.assign(values[target][train_part])
        runs[target].predicted["baseline:majority"] = bl.majority_class(
            train_classes, rows.size
        )
        baseline_classes[target]["baseline:majority"] = bl.majority_class(
            train_classes, len(frame)
        )
        for kind in config.models:
            for name in _model_rows(kind, config):
                runs[target].predicted[name] = np.full(rows.size, -1)
                runs[target].confidence[name] = np.zeros(rows.size)
    for period in periods:
        in_period = test_part[test_period == period]
        boundary = float(submit[in_period].min())
        past = np.flatnonzero((finish < boundary) & (submit < boundary - delay))
        for target in targets:
            run = runs[target]
            here = np.isin(run.rows, in_period)
            if not here.any():
                continue
            train = past[np.isfinite(values[target][past])]
            train = train[-config.max_train_rows :]
            fit_rows, stop_rows, val = _hold_out(train, config)
            y_val = run.bins.assign(values[target][val])
            for kind in config.models:
                started = time.perf_counter()
                model = _model(kind, run.bins.n_classes, config)
                X = features.X
                model.fit(
                    X.iloc[fit_rows],
                    run.bins.assign(values[target][fit_rows]),
                    X_val=X.iloc[stop_rows],
                    y_val=run.bins.assign(values[target][stop_rows]),
                )
                proba = model.predict_proba(X.iloc[run.rows[here]])
                name = f"model:{kind}"
                run.predicted[name][here] = np.argmax(proba, axis=1)
                run.confidence[name][here] = proba.max(axis=1)
                if config.safety:
                    choice = choose_level(
                        model.predict_proba(X.iloc[val]),
                        y_val,
                        values[target][val],
                        np.asarray(run.bins.values),
                        {n: c[val] for n, c in baseline_classes[target].items()},
                    )
                    safe = f"{name}_safe"
                    run.predicted[safe][here] = cumulative_class(proba, choice.level)
                    run.confidence[safe][here] = proba.max(axis=1)
                    run.levels.setdefault(safe, {})[period] = choice.level
                if config.anchor_weight > 0:
                    anchor = choose_anchor(
                        y_val,
                        {
                            n: c[val]
                            for n, c in baseline_classes[target].items()
                            if n not in _NOT_ANCHORS
                        },
                        run.bins.n_classes,
                    )
                    anchored = f"{name}_anchored"
                    run.predicted[anchored][here] = anchored_class(
                        proba,
                        baseline_classes[target][anchor][run.rows[here]],
                        config.anchor_weight,
                    )
                    run.confidence[anchored][here] = proba.max(axis=1)
                    run.anchors.setdefault(anchored, {})[period] = anchor
                logger.info(
                    "trace %s %s %s: trained on %d jobs (%d rounds) in %.1f s",
                    target,
                    period,
                    kind,
                    train.size,
                    getattr(model, "n_estimators_", -1),
                    time.perf_counter() - started,
                )
    split_info: dict[str, object] = {
        "method": "time_ordered_walk_forward",
        "test_fraction": f,
        "n_jobs": int(len(frame)),
        "n_train": int(train_part.size),
        "n_test": int(test_part.size),
        "cadence": config.cadence,
        "test_periods": periods,
        "train_end": str(frame["submit_time"].iloc[train_part].max()),
        "test_start": str(frame["submit_time"].iloc[test_part].min()),
        "max_train_rows": config.max_train_rows,
        "label_delay_quantile": config.label_delay_quantile,
        "label_delay_s": delay,
        "n_estimators": config.n_estimators,
        "max_categories": config.max_categories,
        "safety_levels": {t: r.levels for t, r in runs.items()},
        "anchor_weight": config.anchor_weight,
        "anchors": {t: r.anchors for t, r in runs.items()},
    }
    return WalkForwardResult(split_info, runs, features, notes)
