"""Train both model kinds for the four targets, tune tail rules, evaluate, bundle.

Pure function of the labelled history, the bins and a config (no database, no
MLflow): :func:`train` returns everything the runner
(:mod:`pipelines.retraining.train_and_register`) logs, reports and registers. Splits are
time-ordered by default: train on the oldest tasks, validate (early stopping, tail
thresholds, choice of model kind) on the next, test on the newest, which is what
production sees; the model registered is then fitted one part later
(:func:`served_model`), so its trees reach the tasks the test held out. What to
fit is :mod:`pipelines.training.config`; the fits themselves (each kind, target
and half-life) are :mod:`pipelines.training.fitting`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.assess.evaluation import (
    MultiTargetEvaluation,
    all_correct,
    evaluate_targets,
)
from panda_predictor.core.assess.splits import (
    TimeSplit,
    stratified_split,
    time_ordered_split,
)
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.cost_choice import CostSettings
from panda_predictor.core.decide.scout_policy import NO_TRANSFORMATION
from panda_predictor.core.decide.tail_rule import CoverageCurve, coverage_accuracy_curve
from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.features.history import split_transhome
from panda_predictor.core.features.pipeline import FeaturePipeline
from panda_predictor.serving.bundle import Bundle
from pipelines.training.calibration import (
    ServedParts,
    calibration_metrics,
    fit_calibrators,
    served_parts,
    union_rows,
)
from pipelines.training.combination import tune_combination
from pipelines.training.config import AUTO, TrainingConfig
from pipelines.training.cost_tuning import choose_price, use_tables
from pipelines.training.dataset import LabelledHistory
from pipelines.training.fit_progress import FitProgress
from pipelines.training.fitting import KindResult, best_kind, fit_kinds
from pipelines.training.self_tuning import CadenceChoice, choose_cadence


@dataclass
class TrainingResult:
    """Everything one training run produced."""

    bundle: Bundle
    kinds: dict[str, KindResult]
    served: MultiTargetEvaluation
    served_kinds: dict[str, str]
    test_tasks: pd.DataFrame
    y_test: dict[str, np.ndarray]
    coverage: dict[str, CoverageCurve]
    split_info: dict[str, Any]
    #: Per target the served distributions (before calibration) on the
    #: validation and test parts, for the reliability figures.
    calibration: dict[str, ServedParts] = field(default_factory=dict)


def gate_metrics(evaluation: MultiTargetEvaluation) -> dict[str, float]:
    """Return the flat metrics the champion gate compares, plus all the others.

    Adds ``mean_accuracy``, ``<target>.tail_recall`` (recall of the largest class) and
    ``<target>.under_allocation`` to the evaluation's own names.
    """
    out = dict(evaluation.to_dict())
    out["mean_accuracy"] = float(evaluation.mean_accuracy)
    for name, ev in evaluation.targets.items():
        out[f"{name}.tail_recall"] = float(ev.recall[-1])
        out[f"{name}.under_allocation"] = float(ev.under_allocation_rate)
    return out


def training_parts(
    history: LabelledHistory, bins: BinSet, config: TrainingConfig
) -> TimeSplit:
    """Return the configured split of ``history`` (what :func:`train` uses unless
    given ``parts``): by default the oldest tasks train, the next validate and the
    newest test."""
    frame = history.frame
    if len(frame) < 20:
        raise ValueError(
            f"The training set must hold at least 20 labelled tasks. Got {len(frame)} "
            "instead."
        )
    if config.split == "time":
        return time_ordered_split(
            frame["creationdate"].to_numpy(),
            config.train_fraction,
            config.val_fraction,
            config.test_fraction,
        )
    if config.split == "stratified":
        # 85/15 as in the PanDA ML paper; validation is a slice of the training part.
        y = bins.assign(TARGET_NAMES[0], frame[TARGET_NAMES[0]].to_numpy())
        train, test = stratified_split(y, test_size=0.15, seed=config.seed)
        cut = int(len(train) * (1 - config.val_fraction / 0.85))
        return TimeSplit(train[:cut], train[cut:], test)
    raise ValueError(
        f"The 'split' setting must be 'time' or 'stratified'. Got {config.split!r} "
        "instead."
    )


def serving_parts(parts: TimeSplit) -> TimeSplit:
    """Return the split the served model is fitted on: ``parts`` one part later.

    The gate judges a model whose trees fit the training part, tuned on the
    validation part and scored on the newest, held-out test part. Serving that
    model would leave the newest tasks out of every tree. The served model is
    the same configuration fitted again one part later: its trees fit the
    training and validation parts, and the test part validates it (early
    stopping, tail rules, combination, calibration, prices), standing in as its
    test part too. With 80/10/10 that is the trace benchmark's split (the older
    90 % fit, the newest 10 % validate), so what is measured is what is served;
    and a later run's test part, its own newest tenth, starts after this
    model's trees stop, so the gate never scores a champion on tasks its trees
    fitted (docs/retraining.md).
    """
    return TimeSplit(np.concatenate([parts.train, parts.val]), parts.test, parts.test)


def refits_for_serving(config: TrainingConfig) -> bool:
    """Return whether the model registered is the refit of :func:`serving_parts`:
    only when ``config.refit_for_serving`` and the split is time-ordered (a
    stratified split's test part is not the newest)."""
    return config.refit_for_serving and config.split == "time"


def registered_parts(parts: TimeSplit, config: TrainingConfig) -> TimeSplit:
    """Return the split the registered model is fitted on, given the gated
    ``parts``: :func:`serving_parts` where :func:`refits_for_serving`, else
    ``parts`` themselves."""
    return serving_parts(parts) if refits_for_serving(config) else parts


def class_labels(frame: pd.DataFrame, bins: BinSet) -> dict[str, np.ndarray]:
    """Return each target's class per row (-1 where the label is unknown)."""
    missing = [t for t in bins.targets if t not in frame.columns]
    if missing:
        raise ValueError(
            f"The training set must have a label column for every target. Got none "
            f"for {missing} instead."
        )
    return {t: bins.assign(t, frame[t].to_numpy(dtype=float)) for t in bins.targets}


def _window(
    history: LabelledHistory, parts: TimeSplit, limit: int | None
) -> tuple[LabelledHistory, TimeSplit]:
    """Keep the newest ``limit`` training rows and every validation and test row.

    Returns the smaller history and the parts as positions in it. Dropping the older
    training rows before the features are built, not only before the fits, is what
    keeps a 4M-task training within time and memory: the features, the labels and
    the frames are built for the rows used. The history features still see every
    task (the caller passes the whole history as their context).
    """
    if limit is None or len(parts.train) <= limit:
        return history, parts
    if limit < 1:
        raise ValueError(
            f"The 'max_train_rows' field must be a positive number of rows or None. "
            f"Got {limit!r} instead."
        )
    frame = history.frame
    times = pd.to_datetime(frame["creationdate"]).to_numpy(dtype="datetime64[ns]")
    newest = np.argsort(times[parts.train], kind="stable")[-limit:]
    train = np.sort(parts.train[newest])
    keep = np.unique(np.concatenate([train, parts.val, parts.test]))
    position = np.full(len(frame), -1, dtype=np.int64)
    position[keep] = np.arange(len(keep))
    kept = LabelledHistory(frame.iloc[keep].reset_index(drop=True))
    return kept, TimeSplit(position[train], position[parts.val], position[parts.test])


def _evaluate(
    y_test: dict[str, np.ndarray],
    pred: dict[str, np.ndarray],
    bins: BinSet,
) -> MultiTargetEvaluation:
    return evaluate_targets(
        y_test,
        pred,
        n_classes={t: bins[t].n_classes for t in y_test},
        class_names={t: list(bins[t].labels) for t in y_test},
    )


def _coverage(conf: dict[str, np.ndarray], y_test, pred) -> CoverageCurve:
    weakest = np.min(np.vstack([conf[t] for t in y_test]), axis=0)
    return coverage_accuracy_curve(weakest, all_correct(y_test, pred))


def _cadence(
    kinds: dict[str, KindResult],
    served_kinds: dict[str, str],
    y: dict[str, np.ndarray],
    parts: tuple[np.ndarray, np.ndarray, np.ndarray],
    created: pd.Series,
) -> CadenceChoice:
    """Choose the next retraining's cadence from the served models' ageing.

    Each validation task's share of labelled targets predicted right is set
    against its age after the newest training task; the arrival rate is the
    training window's tasks per day.
    """
    train, val, _ = parts
    times = pd.to_datetime(created).to_numpy(dtype="datetime64[ns]")
    day = np.timedelta64(1, "D")
    age = (times[val] - times[train].max()) / day
    right = np.zeros(len(val))
    known = np.zeros(len(val))
    for target, labels in y.items():
        right += kinds[served_kinds[target]].val_right[target]
        known += labels[val] >= 0
    keep = known > 0
    span = max((times.max() - times.min()) / day, 1.0)
    return choose_cadence(age[keep], right[keep] / known[keep], len(times) / span)


def _cost_settings(
    bundle: Bundle, frame: pd.DataFrame, val: np.ndarray, config: TrainingConfig
) -> tuple[CostSettings, dict[str, Any]]:
    """Return the cost policy's prices: the configured delay price, or the one
    chosen on the validation part
    (:func:`pipelines.training.cost_tuning.choose_price`), with the early
    re-measurement on, off, or chosen there too ("auto")."""
    if config.delay_price != AUTO:
        price = float(config.delay_price)
        # Nothing is tuned with a set price, so "auto" cannot choose: it is off.
        early = config.early_remeasure is True
        cost = replace(bundle.cost.with_price(price), early_remeasure=early)
        return cost, {"delay_price": price, "early_remeasure": early}
    return choose_price(
        bundle, frame.iloc[val], frame, early_remeasure=config.early_remeasure
    )


def train(
    history: LabelledHistory,
    bins: BinSet,
    config: TrainingConfig | None = None,
    parts: TimeSplit | None = None,
    progress: bool = False,
) -> TrainingResult:
    """Fit every model kind on the history and bundle the best kind per target.

    The test rows are the tasks of the test part whose four labels are all known,
    so every model and the joint metrics are scored on exactly the same tasks.
    ``parts`` overrides the configured split (walk-forward evaluation uses it);
    ``config`` defaults to :class:`TrainingConfig` defaults. ``progress`` shows a
    bar per fit (rounds or epochs, rows per second) on stderr.
    """
    config = config or TrainingConfig()
    parts = parts if parts is not None else training_parts(history, bins, config)
    context = history.history  # every task, for the history features
    history_train_rows = len(parts.train)
    history, parts = _window(history, parts, config.max_train_rows)
    frame = history.frame
    y = class_labels(frame, bins)
    test_all = parts.test[np.all([y[t][parts.test] >= 0 for t in y], axis=0)]
    if len(test_all) == 0:
        raise ValueError(
            "The test part must hold tasks with all four labels known. Got none: "
            "use more history."
        )
    tasks = history.tasks
    pipeline = FeaturePipeline(targets=tuple(bins.targets)).fit(
        tasks.iloc[parts.train], context
    )
    X = pipeline.transform(tasks, context)
    del context
    fit_parts = (parts.train, parts.val, test_all)
    kinds = fit_kinds(
        X, y, fit_parts, bins, config, frame["creationdate"], FitProgress(progress)
    )
    y_test = {t: y[t][test_all] for t in y}
    for res in kinds.values():
        res.evaluation = _evaluate(y_test, res.test_pred, bins)
    served_kinds = {t: best_kind(kinds, t) for t in y}
    cadence = _cadence(kinds, served_kinds, y, fit_parts, frame["creationdate"])
    served_pred = {t: kinds[served_kinds[t]].test_pred[t] for t in y}
    served_conf = {t: kinds[served_kinds[t]].test_conf[t] for t in y}
    served = _evaluate(y_test, served_pred, bins)
    coverage = {
        k: _coverage(r.test_conf, y_test, r.test_pred) for k, r in kinds.items()
    }
    coverage["served"] = _coverage(served_conf, y_test, served_pred)
    split_info = _split_info(
        config, frame, parts, test_all, history_train_rows, kinds, served_kinds
    )
    split_info["retrain_every_days"] = cadence.days
    split_info["cadence"] = cadence.to_dict()
    bundle = _bundle(
        pipeline, bins, kinds, served_kinds, frame, tasks, y, parts, served, split_info
    )
    calibration = _tune_decision(
        bundle, kinds, served_kinds, X, frame, y, bins, parts, test_all, config
    )
    split_info.update(
        {k: bundle.info[k] for k in ("combination", "cost") if k in bundle.info}
    )
    return TrainingResult(
        bundle=bundle,
        kinds=kinds,
        served=served,
        served_kinds=served_kinds,
        test_tasks=frame.iloc[test_all].reset_index(drop=True),
        y_test=y_test,
        coverage=coverage,
        split_info=split_info,
        calibration=calibration,
    )


def served_model(
    history: LabelledHistory,
    bins: BinSet,
    config: TrainingConfig,
    parts: TimeSplit,
    gated: TrainingResult,
    progress: bool = False,
) -> TrainingResult:
    """Return the training to register: ``gated`` (trained on ``parts``) fitted
    again one part later (:func:`serving_parts`).

    The refit's own test part is its validation part, so its figures would flatter
    it: it carries the gated model's metrics instead, measured on tasks neither
    saw a tree of, the estimate of this configuration on the next tasks. Without
    ``config.refit_for_serving``, or with a split that is not time-ordered (whose
    test part is not the newest), the gated training itself.
    """
    if not refits_for_serving(config):
        return gated
    served = train(history, bins, config, registered_parts(parts, config), progress)
    served.bundle.metrics = dict(gated.bundle.metrics)
    served.bundle.info["metrics_test_period"] = gated.split_info["test_period"]
    return served


def _split_info(
    config: TrainingConfig,
    frame: pd.DataFrame,
    parts: TimeSplit,
    test_all: np.ndarray,
    history_train_rows: int,
    kinds: dict[str, KindResult],
    served_kinds: dict[str, str],
) -> dict[str, Any]:
    """Return how the history was split and each served model's half-life."""
    times = frame["creationdate"]
    return {
        "split": config.split,
        "train_rows": int(len(parts.train)),
        "history_train_rows": int(history_train_rows),
        "val_rows": int(len(parts.val)),
        "test_rows": int(len(test_all)),
        "train_period": f"{times.iloc[parts.train].min()} .. "
        f"{times.iloc[parts.train].max()}",
        "test_period": f"{times.iloc[test_all].min()} .. {times.iloc[test_all].max()}",
        "half_life_days": {
            t: kinds[k].half_life_days[t] for t, k in served_kinds.items()
        },
    }


def _bundle(
    pipeline: FeaturePipeline,
    bins: BinSet,
    kinds: dict[str, KindResult],
    served_kinds: dict[str, str],
    frame: pd.DataFrame,
    tasks: pd.DataFrame,
    y: dict[str, np.ndarray],
    parts: TimeSplit,
    served: MultiTargetEvaluation,
    split_info: dict[str, Any],
) -> Bundle:
    """Bundle each target's served model and tail rule with what serving needs."""
    train_tasks = tasks.iloc[parts.train]
    frameworks, _ = split_transhome(train_tasks["transhome"])
    return Bundle(
        features=pipeline,
        bins=bins,
        models={t: kinds[served_kinds[t]].models[t] for t in y},
        tail_rules={t: kinds[served_kinds[t]].rules[t] for t in y},
        cost=CostSettings(),
        use_tables=use_tables(frame, y, parts.train, bins),
        known_transformations=sorted(
            train_tasks["transpath"].dropna().astype(str).unique()
        )
        + ([NO_TRANSFORMATION] if train_tasks["transpath"].isna().any() else []),
        known_frameworks=sorted(frameworks.dropna().unique()),
        metrics=gate_metrics(served),
        info={**split_info, "served_kinds": served_kinds},
    )


def _tune_decision(
    bundle: Bundle,
    kinds: dict[str, KindResult],
    served_kinds: dict[str, str],
    X: pd.DataFrame,
    frame: pd.DataFrame,
    y: dict[str, np.ndarray],
    bins: BinSet,
    parts: TimeSplit,
    test_all: np.ndarray,
    config: TrainingConfig,
) -> dict[str, ServedParts]:
    """Tune the bundle's combination, calibrators and prices on the validation part.

    Sets them on ``bundle`` (and in its ``info``); returns the served distributions
    of the validation and test parts the calibrators were fitted and scored on.
    """
    val = parts.val
    rules = {t: kinds[served_kinds[t]].rules[t] for t in y}
    both = union_rows(val, test_all)
    proba = {t: m.predict_proba(X.iloc[both]) for t, m in bundle.models.items()}
    if config.combine_rules:
        at_val = np.searchsorted(both, val)
        bundle.combination = tune_combination(
            rules,
            bundle.models,
            X.iloc[val],
            frame.iloc[val],
            {t: y[t][val] for t in y},
            bins,
            proba={t: p[at_val] for t, p in proba.items()},
        )
        bundle.record_start = str(frame["creationdate"].iloc[val].min())
        bundle.info["combination"] = bundle.combination.to_dict()
    calibration = served_parts(
        bundle.combination, rules, proba, X, frame, y, bins, val, test_all
    )
    bundle.calibrators = fit_calibrators(calibration, config.calibration_method)
    bundle.metrics.update(calibration_metrics(calibration, bundle.calibrators))
    bundle.info["calibration_method"] = config.calibration_method
    bundle.cost, bundle.info["cost"] = _cost_settings(bundle, frame, val, config)
    return calibration
