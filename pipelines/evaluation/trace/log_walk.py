"""Walk forward through a job log's newest part with the production predictor.

The log is first mapped onto the task and history schema the hook reads
(:func:`panda_predictor.ingest.to_panda.jobs_to_tasks`). The oldest
``1 - test_fraction`` of the tasks (by creation) fit the bins; the newest part is
tested period by period (a calendar month by default). Before each period the
production training (:func:`pipelines.training.train.train`) runs on every task
whose labels were known before the period's first submission, and the period's
tasks are then predicted by the production
:class:`~panda_predictor.serving.predictor.Predictor` with the labelled history of
the hook's window (:func:`served_history`, moved on every day of the period:
:func:`serving_steps`), as the hook would have predicted them at their
submission: the same features, model, tail rule, expert combination and policy.
The recency rules are scored as baselines from the same history features.

``development_part`` drops the test part altogether, so that design choices can be
tried on the older tasks without the real test part ever being looked at.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field, replace
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.assess import baselines as bl
from panda_predictor.core.assess.splits import TimeSplit, time_ordered_split
from panda_predictor.core.bins import BinSet, fit_bins
from panda_predictor.core.decide.calibration import (
    METHODS,
    Calibrator,
    fit_calibrator,
    served_mixture,
)
from panda_predictor.core.decide.experts import EXPERTS
from panda_predictor.core.features.task_features import HOOK_COLUMNS
from panda_predictor.errors import UserInputError
from panda_predictor.ingest.swf import TRACE_TARGETS
from panda_predictor.ingest.to_panda import jobs_to_tasks
from panda_predictor.serving.classified import Classified
from panda_predictor.serving.combination import ServingHistory
from panda_predictor.serving.decision import decide_table
from panda_predictor.serving.predictor import Predictor, priced_probabilities
from panda_predictor.serving.recent import DEFAULT_DAYS
from pipelines.evaluation.trace.target_run import (
    PRODUCTION,
    REQUEST_OF,
    TargetRun,
    baseline_values,
    drop_unpredicted,
    fill_baselines,
    new_target_run,
)
from pipelines.evaluation.walk_forward import check_cadence, walk_periods
from pipelines.training.config import AUTO, TrainingConfig, training_config
from pipelines.training.dataset import LabelledHistory
from pipelines.training.train import (
    TrainingResult,
    class_labels,
    registered_parts,
    train,
    training_parts,
)

logger = logging.getLogger(__name__)

#: Classes per trace target (quantile bins of the training part).
TRACE_N_CLASSES = {"walltime": 5, "cputime": 4, "ramcount": 4, "iointensity": 4}
#: Fewest labelled tasks a retraining needs (below: the period is not predicted).
MIN_TRAIN_TASKS = 50


@dataclass
class WalkForwardConfig:
    """Knobs of one benchmark run (one set of defaults for every log).

    The model's own parameters are the production ones
    (``pipelines/params/training.yaml`` through
    :func:`pipelines.training.config.training_config`, XGBoost only); ``n_estimators``
    caps its rounds (tests use few), ``delay_price`` replaces the per-deployment choice
    as the ``delay_price`` setting does.
    """

    test_fraction: float = 0.2
    max_train_rows: int | None = 100_000
    max_periods: int | None = None
    cadence: str = "auto"
    half_life_days: float | str | None = "auto"
    n_estimators: int | None = None
    recall_target: float = 0.95
    delay_price: float | None = None
    #: The ``early_remeasure`` setting: each retraining sizes for the early
    #: re-measurement of the tasks the decision marks for it ("auto": chosen per
    #: retraining on its validation part).
    early_remeasure: bool | str = AUTO
    seed: int = 0
    #: The hook's history window (tasks created in the last ``history_days``);
    #: tests widen it to show that it is what keeps older tasks out.
    history_days: int = DEFAULT_DAYS
    #: How often the window moves on within a period (days): a period's tasks are
    #: predicted in steps of this many days, each with the window that starts
    #: ``history_days`` before the step's first task (:func:`serving_steps`).
    window_step_days: float = 1.0

    def training_config(self) -> TrainingConfig:
        """Return the production training config with these knobs applied."""
        settings = SimpleNamespace(
            tail_recall_target=self.recall_target,
            delay_price=self.delay_price,
            early_remeasure=self.early_remeasure,
        )
        base = training_config(settings, kinds=("xgboost",))
        xgboost = dict(base.xgboost)
        if self.n_estimators is not None:
            xgboost["n_estimators"] = self.n_estimators
        return replace(
            base,
            seed=self.seed,
            half_life_days=self.half_life_days,
            xgboost=xgboost,
        )


@dataclass
class WalkForwardResult:
    """Everything a benchmark run produced, before scoring."""

    split: dict[str, object]
    runs: dict[str, TargetRun]
    tasks: pd.DataFrame
    task_key: np.ndarray
    warnings: list[str]


def split_off_test_part(jobs: pd.DataFrame, test_fraction: float) -> TimeSplit:
    """Split the jobs by submit time: the older part, then the newest ``test_fraction``.

    A log whose jobs share too few submit times cannot be split in time; that is
    the log's fault, so it is said as such, not as a traceback.
    """
    try:
        return time_ordered_split(
            jobs["submit_s"].to_numpy(), 1.0 - test_fraction, 0.0, test_fraction
        )
    except ValueError as exc:
        raise UserInputError(
            f"The job log's submit times must spread enough to hold out the newest "
            f"{test_fraction:.0%} of its {len(jobs)} jobs for testing. Got: {exc}"
        ) from exc


def development_part(frame: pd.DataFrame, test_fraction: float) -> pd.DataFrame:
    """Return the jobs *before* the test part: the frame a design choice may see."""
    split = split_off_test_part(frame, test_fraction)
    return frame.iloc[np.sort(split.train)].reset_index(drop=True)


def fit_trace_bins(values: dict[str, np.ndarray]) -> tuple[BinSet, list[str]]:
    """Quantile-fit bins per target on training values; return them and warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = fit_bins(
            values,
            n_classes={t: TRACE_N_CLASSES[t] for t in values},
            fixed_edges={},
            version="trace",
        )
    bins = BinSet(
        "trace",
        {t: replace(fitted[t], unit=TRACE_TARGETS[t][1]) for t in values},
    )
    return bins, [str(w.message) for w in caught]


def _known_window(
    tasks: pd.DataFrame, boundary: np.datetime64, config: WalkForwardConfig
) -> pd.DataFrame:
    """Return the tasks whose labels were known before ``boundary``, oldest first
    (the newest ``max_train_rows`` of them where that cap is set)."""
    known = tasks["labels_known_at"].to_numpy(dtype="datetime64[ns]") < boundary
    window = tasks[known]
    if config.max_train_rows is not None:
        window = window.iloc[-config.max_train_rows :]
    return window.reset_index(drop=True)


def retraining_parts(
    window: pd.DataFrame, bins: BinSet, config: WalkForwardConfig
) -> TimeSplit:
    """Return the split a production retraining registers its model with.

    The same two calls a retraining makes, on the same ``training.yaml``:
    :func:`training_parts` (by creation time; a cut inside a group of equal
    times moves to the group's start) and :func:`registered_parts` (80/10/10:
    the older 90 % fit the trees, the newest tenth validates). So early stopping,
    the tail rule, the combination's settings, calibration and prices are chosen
    on tasks the trees did not fit on, as in production. Raises ``ValueError``
    where the window's creation times cannot be split.
    """
    training = config.training_config()
    gated = training_parts(LabelledHistory(window), bins, training)
    return registered_parts(gated, training)


#: Why a retraining leaves a target out (``trainable_bins``).
ONE_CLASS = "one class in its training labels"
NOT_VALIDATED = "no validation task with its label and the others'"


def trainable_bins(
    window: pd.DataFrame, parts: TimeSplit, bins: BinSet
) -> tuple[BinSet, dict[str, str]]:
    """Return the bins of the targets a retraining can learn, and why not the others.

    Production refuses a target whose training labels hold one class (nothing to
    tell apart), and a validation part with no task whose labels are all known
    (nothing to stop, calibrate or compare on). A log may have such a stretch: a
    site that records one run time for every job, or memory only for some
    months. An unseen log must not fail for it: the retraining learns the other
    targets, and the left-out target's tasks of that period stay unpredicted
    (reported, not scored). Where the targets' known validation labels do not
    meet, the one known on the fewest validation tasks goes first.
    """
    train_labels = class_labels(window.iloc[parts.train], bins)
    left_out = {
        t: ONE_CLASS for t, y in train_labels.items() if np.unique(y[y >= 0]).size < 2
    }
    known = {t: y >= 0 for t, y in class_labels(window.iloc[parts.val], bins).items()}
    kept = [t for t in bins.targets if t not in left_out]
    while kept and not np.logical_and.reduce([known[t] for t in kept]).any():
        fewest = min(kept, key=lambda t: int(known[t].sum()))
        kept.remove(fewest)
        left_out[fewest] = NOT_VALIDATED
    return BinSet(bins.version, {t: bins[t] for t in kept}), left_out


def _retrain(
    window: pd.DataFrame,
    parts: TimeSplit,
    bins: BinSet,
    config: WalkForwardConfig,
    period: str,
) -> TrainingResult:
    """Run the production training on the tasks known before ``period``."""
    try:
        return train(LabelledHistory(window), bins, config.training_config(), parts)
    except ValueError as exc:
        raise UserInputError(
            f"The retraining before period {period} ({len(window)} finished "
            f"tasks) must succeed. Got: {exc}"
        ) from exc


def served_history(
    tasks: pd.DataFrame, created: np.ndarray, step: np.ndarray, days: int
) -> ServingHistory:
    """Return the labelled history a step of a period's tasks is predicted with.

    The hook reads the tasks created in the last ``days``
    (:class:`~panda_predictor.serving.recent.IncrementalHistory`); here the window
    starts ``days`` before the step's first task and ends at its last, and each
    task still sees only the labels known before its own creation. So a task late
    in a step sees at most one step (:func:`serving_steps`, a day by default) more
    of the oldest history than the hook would: reading the window again per task
    would rebuild the history features and the experts' records once per task.
    """
    step_created = created[step]
    start = step_created.min() - np.timedelta64(days, "D")
    last = step_created.max()
    return ServingHistory(tasks[(created >= start) & (created <= last)])


def check_step_days(step_days: float) -> None:
    """Raise unless ``step_days`` is a positive number of days."""
    if not step_days > 0:
        raise ValueError(
            f"The 'window_step_days' field must be a positive number of days. "
            f"Got {step_days!r} instead."
        )


def serving_steps(
    created: np.ndarray, rows: np.ndarray, step_days: float
) -> list[np.ndarray]:
    """Split a period's ``rows`` into steps of at most ``step_days`` by creation.

    Each step starts at its first task's creation and holds the tasks created
    within ``step_days`` of it, so a step's window (:func:`served_history`) gives
    none of its tasks more than ``step_days`` of older history than the hook's
    window, which starts ``history_days`` before each task. Each step's rows are
    sorted, as a period's are.
    """
    check_step_days(step_days)
    ordered = rows[np.argsort(created[rows], kind="stable")]
    times = created[ordered]
    step = np.timedelta64(int(round(step_days * 86_400e9)), "ns")
    steps: list[np.ndarray] = []
    first = 0
    while first < ordered.size:
        # At least the first task, whatever the step (a step below a nanosecond).
        end = max(int(np.searchsorted(times, times[first] + step, "left")), first + 1)
        steps.append(np.sort(ordered[first:end]))
        first = end
    return steps


def _predict_step(
    retraining: _Retraining,
    tasks: pd.DataFrame,
    jobs: pd.DataFrame,
    step: np.ndarray,
    created: np.ndarray,
    targets: list[str],
    runs: dict[str, TargetRun],
    baseline_parts: dict[str, list[tuple[np.ndarray, dict[str, np.ndarray]]]],
    history_days: int,
    requested: dict[str, bool],
) -> None:
    """Predict one step of a period's tasks (:func:`serving_steps`) as the hook
    would, and score the baselines too."""
    result, period = retraining.result, retraining.period
    assert result is not None
    predictor = Predictor(result.bundle, "trace", period)
    history = served_history(tasks, created, step, history_days)
    # The hook's schema: task columns and requests, never the labels (a label
    # column has a preset's name and must not be read as one).
    step_tasks = tasks.iloc[step]
    step_tasks = step_tasks[[c for c in HOOK_COLUMNS if c in step_tasks]]
    classified = predictor.classified(step_tasks, history)
    table = decide_table(predictor, step_tasks, history, classified)
    X = classified.features
    assert isinstance(X, pd.DataFrame)  # the frame route keeps the feature frame
    applied_all = (table["decision"] == "applied").to_numpy()
    for target in targets:
        if target not in result.bundle.bins.targets:
            continue  # this retraining could not learn it: left unpredicted
        run = runs[target]
        here = np.isin(run.rows, step)
        pick = np.searchsorted(step, run.rows[here])
        run.predicted[PRODUCTION][here] = table[f"{target}_class"].to_numpy()[pick]
        run.confidence[PRODUCTION][here] = table[f"{target}_confidence"].to_numpy()[
            pick
        ]
        run.applied[PRODUCTION][here] = applied_all[pick]
        run.values[PRODUCTION][here] = table[f"{target}_value"].to_numpy()[pick]
        run.fixed[PRODUCTION][here] = target in predictor.fixed_targets
        run.early[PRODUCTION][here] = table["early_remeasure"].to_numpy()[pick]
        run.predicted["model:xgboost"][here] = classified.model_chosen[target][pick]
        run.confidence["model:xgboost"][here] = classified.proba[target][pick].max(
            axis=1
        )
        run.applied["model:xgboost"][here] = applied_all[pick]
        _record_distributions(
            run, here, pick, classified, retraining.method_calibrators.get(target)
        )
        followed = table.get(f"{target}_expert")
        if followed is not None:
            names = followed.to_numpy()[pick]
            run.followed[here] = [EXPERTS.index(n) for n in names]
        jobs_here = jobs.iloc[run.rows[here]]
        baseline_parts[target].append(
            (
                here,
                baseline_values(
                    jobs_here,
                    X.iloc[pick].reset_index(drop=True),
                    target,
                    retraining.label_medians[target],
                    requested[target],
                ),
            )
        )


def method_calibrators(result: TrainingResult) -> dict[str, dict[str, Calibrator]]:
    """Return, per target, a calibrator of every method fitted on the retraining's
    validation part, as the training fits the production one (for the methods'
    comparison; a target without served parts gets none)."""
    return {
        t: {
            method: fit_calibrator(parts.val, parts.y_val, method, parts.followed_val)
            for method in METHODS
        }
        for t, parts in result.calibration.items()
    }


def _record_distributions(
    run: TargetRun,
    here: np.ndarray,
    pick: np.ndarray,
    classified: Classified,
    calibrators: dict[str, Calibrator] | None,
) -> None:
    """Keep the step's served distributions: production's and each method's.

    Each method's calibrator (:func:`method_calibrators`) is applied to the served
    mixture, built as the served route builds it (from
    :func:`~panda_predictor.serving.predictor.priced_probabilities`): the refit
    of the served method is then the production distribution itself, so the
    methods are compared like with like.
    """
    t = run.target
    followed = classified.followed.get(t)
    raw = served_mixture(
        priced_probabilities(classified.proba[t]),
        classified.chosen[t],
        followed,
        classified.record_accuracy.get(t),
    )[pick]
    followed = None if followed is None else followed[pick]
    run.distribution[PRODUCTION][here] = classified.distribution[t][pick]
    for method in METHODS:
        name = f"calibration:{method}"
        if calibrators is None:
            run.distribution[name][here] = raw
            continue
        run.distribution[name][here] = calibrators[method].transform(raw, followed)


def run_walk_forward(
    jobs: pd.DataFrame, targets: list[str], config: WalkForwardConfig
) -> WalkForwardResult:
    """Run the production predictor and baselines over the test part of ``jobs``."""
    f = config.test_fraction
    tasks = jobs_to_tasks(jobs)
    split = split_off_test_part(jobs, f)
    train_part, test_part = np.sort(split.train), np.sort(split.test)
    older = {t: tasks[t].to_numpy(dtype=float)[train_part] for t in targets}
    # A target recorded only in the test part has nothing to fit classes on.
    unbinned = [t for t, v in older.items() if not np.isfinite(v).any()]
    targets = [t for t in targets if t not in unbinned]
    # Whether the log holds any request for a target (the request baseline).
    requested = {
        t: bool(np.isfinite(jobs[REQUEST_OF[t]].to_numpy(float)).any()) for t in targets
    }
    if not targets:
        raise UserInputError(
            f"The job log must record a target for some job of its older "
            f"{1 - f:.0%} to fit classes on. Got none for {unbinned}."
        )
    bins, notes = fit_trace_bins({t: older[t] for t in targets})
    check_cadence(config.cadence)
    check_step_days(config.window_step_days)
    created = tasks["creationdate"].to_numpy(dtype="datetime64[ns]")
    runs = {t: new_target_run(tasks, t, bins[t], test_part) for t in targets}
    baseline_parts: dict[str, list[tuple[np.ndarray, dict[str, np.ndarray]]]] = {
        t: [] for t in targets
    }
    skipped: list[str] = []
    left_out: dict[str, dict[str, str]] = {}
    periods: list[str] = []
    choices: dict[str, dict[str, Any]] = {}
    retrain = partial(_retrain_at, tasks=tasks, bins=bins, config=config)
    walk = walk_periods(created, test_part, config.cadence, retrain, config.max_periods)
    for period, retraining in walk:
        periods.append(retraining.period)
        if retraining.left_out:
            left_out[retraining.period] = retraining.left_out
        if retraining.result is None:
            skipped.append(retraining.period)
            continue
        started = time.perf_counter()
        choices[retraining.period] = _choices(retraining, period.rows)
        bundle = retraining.result.bundle
        combination = bundle.combination.to_dict() if bundle.combination else {}
        for target in targets:
            if target in bundle.bins.targets:  # as _predict_step: learnt ones only
                runs[target].combination[retraining.period] = dict(combination)
        for step in serving_steps(created, period.rows, config.window_step_days):
            _predict_step(
                retraining,
                tasks,
                jobs,
                step,
                created,
                targets,
                runs,
                baseline_parts,
                config.history_days,
                requested,
            )
        logger.info(
            "trace %s: trained on %d tasks and predicted %d in %.1f s; next "
            "retraining in %s days",
            retraining.period,
            len(retraining.window),
            period.rows.size,
            time.perf_counter() - started,
            choices[retraining.period]["retrain_every_days"],
        )
    for target in targets:
        fill_baselines(runs[target], baseline_parts[target], tasks, train_part)
        drop_unpredicted(runs[target])
    split_info: dict[str, object] = {
        "method": "time_ordered_walk_forward_production_predictor",
        "test_fraction": f,
        "n_jobs": int(len(jobs)),
        "n_train": int(train_part.size),
        "n_test": int(test_part.size),
        "cadence": config.cadence,
        "test_periods": periods,
        "self_tuning": choices,
        "periods_without_model": skipped,
        "targets_left_out": left_out,
        "targets_without_classes": unbinned,
        "train_end": str(jobs["submit_time"].iloc[train_part].max()),
        "test_start": str(jobs["submit_time"].iloc[test_part].min()),
        "max_train_rows": config.max_train_rows,
        "half_life_days": config.half_life_days,
        "n_estimators": config.n_estimators,
        "delay_price": config.delay_price,
        "combination": {t: r.combination for t, r in runs.items()},
    }
    key = bl.group_codes(jobs["user"], jobs["executable"].astype(object).fillna("-"))
    return WalkForwardResult(split_info, runs, tasks, key, notes)


@dataclass
class _Retraining:
    """One period's retraining: its name, the tasks it saw and its result (if any)."""

    period: str
    window: pd.DataFrame
    result: TrainingResult | None
    #: Targets this retraining could not learn, and why: not predicted in its period.
    left_out: dict[str, str] = field(default_factory=dict)
    #: Per target, every calibration method fitted on the validation part.
    method_calibrators: dict[str, dict[str, Calibrator]] = field(default_factory=dict)
    #: Per target, the median label of the tasks it saw (the median baseline).
    label_medians: dict[str, float] = field(default_factory=dict)


def _retrain_at(
    boundary: np.datetime64,
    tasks: pd.DataFrame,
    bins: BinSet,
    config: WalkForwardConfig,
) -> tuple[_Retraining, int | None]:
    """Retrain on the tasks known before ``boundary``; return it and its cadence.

    Too few finished tasks train nothing: the period's tasks keep their scouts;
    so does a window where no target can be learnt (``trainable_bins``).
    """
    period = str(pd.Timestamp(boundary).date())
    window = _known_window(tasks, boundary, config)
    if len(window) < MIN_TRAIN_TASKS:
        logger.warning(
            "period %s: only %d tasks had finished before it (need %d): "
            "every task keeps its scouts",
            period,
            len(window),
            MIN_TRAIN_TASKS,
        )
        return _Retraining(period, window, None), None
    try:
        parts = retraining_parts(window, bins, config)
    except ValueError as exc:
        logger.warning(
            "period %s: the %d finished tasks cannot be split by creation time "
            "(%s): every task keeps its scouts",
            period,
            len(window),
            exc,
        )
        return _Retraining(period, window, None), None
    trainable, left_out = trainable_bins(window, parts, bins)
    for target, reason in left_out.items():
        logger.warning("period %s: %s not predicted (%s)", period, target, reason)
    if not trainable.targets:
        return _Retraining(period, window, None, left_out), None
    result = _retrain(window, parts, trainable, config, period)
    chosen = result.split_info["retrain_every_days"]
    calibrators = method_calibrators(result)
    medians = {
        t: float(np.nanmedian(window[t].to_numpy(dtype=float)))
        for t in bins.targets
        if t in window
    }
    return _Retraining(period, window, result, left_out, calibrators, medians), chosen


def _choices(retraining: _Retraining, in_period: np.ndarray) -> dict[str, Any]:
    """Return what the period's retraining chose for itself (the self-tuning)."""
    assert retraining.result is not None
    info = retraining.result.split_info
    return {
        "tasks": int(in_period.size),
        "trained_on": int(len(retraining.window)),
        "retrain_every_days": info["retrain_every_days"],
        "half_life_days": info["half_life_days"],
        "delay_price": info.get("cost", {}).get("delay_price"),
        "cost": info.get("cost", {}),
    }
