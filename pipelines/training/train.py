"""Train both model kinds for the four targets, tune tail rules, evaluate, bundle.

Pure function of the labelled history, the bins and a config (no database, no
MLflow): :func:`train` returns everything the runner
(:mod:`pipelines.retraining.train_and_register`) logs, reports and registers. Splits are
time-ordered by default: train on the oldest tasks, validate (early stopping, tail
thresholds, choice of model kind) on the next, test on the newest, which is what
production sees.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.assess.evaluation import (
    MultiTargetEvaluation,
    all_correct,
    evaluate_target,
    evaluate_targets,
)
from panda_predictor.core.assess.splits import (
    TimeSplit,
    stratified_split,
    time_ordered_split,
)
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.calibration import DEFAULT_METHOD
from panda_predictor.core.decide.cost_choice import CostSettings
from panda_predictor.core.decide.scout_policy import NO_TRANSFORMATION
from panda_predictor.core.decide.tail_rule import (
    CoverageCurve,
    TailDecisionRule,
    confidence,
    coverage_accuracy_curve,
)
from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.features.history import split_transhome
from panda_predictor.core.features.pipeline import FeaturePipeline
from panda_predictor.models import ResourceClassifier, model_class
from panda_predictor.models.xgb import QuantisedParts, XGBoostResourceClassifier
from panda_predictor.serving.bundle import Bundle
from pipelines.training.calibration import (
    ServedParts,
    calibration_metrics,
    fit_calibrators,
    served_parts,
    union_rows,
)
from pipelines.training.combination import tune_combination
from pipelines.training.cost_tuning import choose_price, use_tables
from pipelines.training.dataset import LabelledHistory
from pipelines.training.fit_progress import FitProgress
from pipelines.training.self_tuning import (
    HALF_LIFE_CANDIDATES,
    CadenceChoice,
    choose_cadence,
    choose_half_life,
)

log = logging.getLogger(__name__)

#: The ``half_life_days`` value that lets each retraining choose its own.
AUTO = "auto"


@dataclass(frozen=True)
class TrainingConfig:
    """What to train and how; defaults live in ``pipelines/params/training.yaml``."""

    model_kinds: tuple[str, ...] = ("xgboost", "keras")
    split: str = "time"
    train_fraction: float = 0.70
    val_fraction: float = 0.15
    test_fraction: float = 0.15
    recall_target: float = 0.95
    tail_min_precision: float = 0.5
    #: Core-hours one core-hour of a job's delay is worth (the cost policy's one
    #: price); "auto": chosen on the validation part
    #: (pipelines/training/cost_tuning.py).
    delay_price: float | str = AUTO
    seed: int = 0
    #: Days over which a task's weight halves; None: no decay; "auto": chosen per
    #: target among :data:`pipelines.training.self_tuning.HALF_LIFE_CANDIDATES`.
    half_life_days: float | str | None = "auto"
    #: Training rows (a random sample of the training part, and as many validation
    #: rows) on which the candidate half-lives are compared when the part is larger;
    #: the chosen one is then fitted once on all rows. None: compare on all rows.
    half_life_sample_rows: int | None = 200_000
    #: The newest training rows the models fit on (a bounded window; the time decay
    #: gives older rows little weight anyway). None: the whole training part.
    max_train_rows: int | None = 750_000
    #: XGBoost training parts of at least this many rows are quantised once for all
    #: targets and half-lives (:class:`QuantisedParts`); smaller ones per fit.
    quantise_min_rows: int = 200_000
    combine_rules: bool = True
    #: How the served distribution is calibrated, one method for every target
    #: (see :mod:`panda_predictor.core.decide.calibration`, docs/models.md).
    calibration_method: str = DEFAULT_METHOD
    xgboost: Mapping[str, Any] = field(default_factory=dict)
    keras: Mapping[str, Any] = field(default_factory=dict)

    def params_for(self, kind: str) -> dict[str, Any]:
        """Return the constructor parameters of model ``kind``."""
        params = dict(self.xgboost if kind == "xgboost" else self.keras)
        params.setdefault("random_state", self.seed)
        return params


@dataclass
class KindResult:
    """One model kind's fitted models, rules and scores."""

    kind: str
    models: dict[str, ResourceClassifier]
    rules: dict[str, TailDecisionRule]
    val_macro_f1: dict[str, float]
    test_pred: dict[str, np.ndarray]
    test_conf: dict[str, np.ndarray]
    fit_seconds: float
    evaluation: MultiTargetEvaluation | None = None
    half_life_days: dict[str, float | None] = field(default_factory=dict)
    half_life_scores: dict[str, dict[str, float]] = field(default_factory=dict)
    val_right: dict[str, np.ndarray] = field(default_factory=dict)


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


def training_config(
    settings: Any,
    params_file: str | None = None,
    kinds: tuple[str, ...] = (),
    split: str | None = None,
) -> TrainingConfig:
    """Return the training config: YAML parameters, settings, command-line choices.

    ``params_file`` defaults to ``pipelines/params/training.yaml``; the tail recall
    target and the confidence threshold come from the settings; ``kinds`` and
    ``split`` (from the command line) win over the file; the ``delay_price``
    setting, where set, replaces the per-deployment choice.
    """
    from pipelines.params import load_params

    params = load_params("training", params_file)
    if kinds:
        params["model_kinds"] = list(kinds)
    if split:
        params["split"] = split
    params["model_kinds"] = tuple(params.get("model_kinds", ()))
    params.setdefault("recall_target", settings.tail_recall_target)
    if getattr(settings, "delay_price", None) is not None:
        params.setdefault("delay_price", settings.delay_price)
    try:
        return TrainingConfig(**params)
    except TypeError as exc:
        known = sorted(TrainingConfig.__dataclass_fields__)
        raise ValueError(
            f"The training parameters must be among {known}. Got {exc} instead."
        ) from None


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


def _split(history: LabelledHistory, bins: BinSet, config: TrainingConfig):
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


def class_labels(frame: pd.DataFrame, bins: BinSet) -> dict[str, np.ndarray]:
    """Return each target's class per row (-1 where the label is unknown)."""
    missing = [t for t in bins.targets if t not in frame.columns]
    if missing:
        raise ValueError(
            f"The training set must have a label column for every target. Got none "
            f"for {missing} instead."
        )
    return {t: bins.assign(t, frame[t].to_numpy(dtype=float)) for t in bins.targets}


def time_decay_weights(
    created: pd.Series, half_life_days: float | None
) -> np.ndarray | None:
    """Return one weight per task halving every ``half_life_days`` into the past.

    The newest task weighs 1; None (no half-life) gives no weights: every finished
    task counts the same, however old.
    """
    if half_life_days is None:
        return None
    if not half_life_days > 0:
        raise ValueError(
            "The 'half_life_days' field must be positive or None. "
            f"Got {half_life_days!r} instead."
        )
    times = pd.to_datetime(created).to_numpy(dtype="datetime64[ns]")
    age_days = (times.max() - times) / np.timedelta64(1, "D")
    return np.power(0.5, age_days / half_life_days)


@dataclass
class FitRows:
    """The rows one fit learns from and validates on, quantised once for XGBoost."""

    train: np.ndarray
    val: np.ndarray
    quantised: QuantisedParts | None = None


def _fit_rows(
    kind: str,
    X: pd.DataFrame,
    train: np.ndarray,
    val: np.ndarray,
    config: TrainingConfig,
    ref: FitRows | None = None,
) -> FitRows:
    """Return the rows of one kind's fits; XGBoost's quantised once for all targets.

    ``ref`` (a superset of ``train``, already quantised) lends its bin edges, so a
    sample is binned exactly as the full training part. A training part below
    ``quantise_min_rows`` is not quantised ahead: each fit then builds its own
    ``DMatrix``, whose bin edges follow that fit's class and time weights (finer
    where the rare classes are), which on small histories is worth the repeated
    binning.
    """
    if ref is not None:
        quantise = ref.quantised is not None  # a sample follows its training part
    else:
        quantise = kind == "xgboost" and len(train) >= config.quantise_min_rows
    if not quantise:
        return FitRows(train, val)
    params = config.params_for(kind)
    started = time.perf_counter()
    quantised = QuantisedParts(
        X.iloc[train],
        X.iloc[val],
        max_bin=params.get("max_bin", 256),
        n_jobs=params.get("n_jobs", 2),
        ref=None if ref is None else ref.quantised,
    )
    log.info(
        "quantised %d training and %d validation rows in %.1f s",
        len(train),
        len(val),
        time.perf_counter() - started,
    )
    return FitRows(train, val, quantised)


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


def _sample(rows: np.ndarray, size: int | None, seed: int) -> np.ndarray:
    """Return a random sample of ``size`` of ``rows``, in row order (all: as is)."""
    if size is None or len(rows) <= size:
        return rows
    if size < 1:
        raise ValueError(
            "The 'half_life_sample_rows' field must be a positive number of rows or "
            f"None. Got {size!r} instead."
        )
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(rows, size=size, replace=False))


def _fit_target(
    kind: str,
    target: str,
    X: pd.DataFrame,
    labels: np.ndarray,
    rows: FitRows,
    bins: BinSet,
    config: TrainingConfig,
    weights: np.ndarray | None,
    progress: FitProgress,
    label: str,
) -> tuple[ResourceClassifier, TailDecisionRule, float, np.ndarray]:
    """Fit one target's model and tail rule.

    Returns them, the validation macro-F1 and, per validation row, whether the
    target was predicted right (False where its label is unknown). ``label`` names
    the fit on its progress bar.
    """
    train, val = rows.train, rows.val
    tr = train[labels[train] >= 0]
    va = val[labels[val] >= 0]
    if len(np.unique(labels[tr])) < 2:
        raise ValueError(
            f"The training labels of {target} must hold at least two classes "
            f"({len(tr)} labelled training tasks). Got "
            f"only {np.unique(labels[tr]).tolist()} instead."
        )
    factory: Callable[..., ResourceClassifier] = model_class(kind)
    model = factory(n_classes=bins[target].n_classes, **config.params_for(kind))
    log.info("fitting %s for %s on %d tasks", kind, target, len(tr))
    started = time.perf_counter()
    steps = int(getattr(model, "n_estimators", 0) or getattr(model, "epochs", 1))
    unit = "round" if kind == "xgboost" else "epoch"
    with progress.fit(label, len(tr), steps, unit) as on_step:
        if rows.quantised is not None and isinstance(model, XGBoostResourceClassifier):
            model.fit_quantised(
                rows.quantised,
                labels[train],
                labels[val],
                sample_weight=None if weights is None else weights[train],
                on_step=on_step,
            )
        else:
            model.fit(
                X.iloc[tr],
                labels[tr],
                X_val=X.iloc[va],
                y_val=labels[va],
                sample_weight=None if weights is None else weights[tr],
                on_step=on_step,
            )
    log.info(
        "fitted %s in %.1f s (%s rounds or epochs)",
        label,
        time.perf_counter() - started,
        getattr(model, "n_estimators_", None) or getattr(model, "n_epochs_", "?"),
    )
    rule = TailDecisionRule(
        recall_target=config.recall_target, min_precision=config.tail_min_precision
    )
    proba_val = model.predict_proba(X.iloc[va])
    rule.fit(proba_val, labels[va])
    val_pred = rule.predict(proba_val)
    val_f1 = evaluate_target(
        labels[va], val_pred, bins[target].n_classes, target
    ).macro_f1
    right = np.zeros(len(val), dtype=bool)
    right[labels[val] >= 0] = val_pred == labels[va]
    return model, rule, val_f1, right


def _fit_kind(
    kind: str,
    X: pd.DataFrame,
    y: dict[str, np.ndarray],
    parts: tuple[np.ndarray, np.ndarray, np.ndarray],
    bins: BinSet,
    config: TrainingConfig,
    half_lives: Mapping[str, tuple[float | None, ...]],
    created: pd.Series,
    progress: FitProgress,
) -> KindResult:
    """Fit every target with kind ``kind``, trying each of its half-lives.

    A target with several candidate half-lives keeps the one with the best
    validation macro-F1 (:func:`pipelines.training.self_tuning.choose_half_life`). On a
    training part larger than ``half_life_sample_rows`` the candidates are compared
    on a random sample of it (and of the validation part) and only the chosen one is
    fitted on all rows: at 4M tasks that is one full fit per target instead of three.
    """
    train, val, test = parts
    started = time.perf_counter()
    result = KindResult(kind, {}, {}, {}, {}, {}, 0.0)
    rows = _fit_rows(kind, X, train, val, config)
    sample_rows: FitRows | None = None

    def fit(target: str, on: FitRows, h: float | None, what: str = "") -> Any:
        label = f"{kind} {target}, half-life {_days(h)}{what}"
        weights = time_decay_weights(created, h)
        return _fit_target(
            kind, target, X, y[target], on, bins, config, weights, progress, label
        )

    sampled = _sample(rows.train, config.half_life_sample_rows, config.seed)
    for target in y:
        candidates = half_lives[target]
        if len(candidates) > 1 and len(sampled) < len(rows.train):
            if sample_rows is None:
                # The validation part is sampled alike: at 4M tasks it is 600k
                # rows, evaluated every round and predicted after every trial.
                val_sample = _sample(val, config.half_life_sample_rows, config.seed)
                sample_rows = _fit_rows(kind, X, sampled, val_sample, config, ref=rows)
            trials = {h: fit(target, sample_rows, h, ", sample")[2] for h in candidates}
            chosen = choose_half_life(trials)
            fits = {chosen: fit(target, rows, chosen)}
        else:
            fits = {h: fit(target, rows, h) for h in candidates}
            trials = {h: f[2] for h, f in fits.items()}
            chosen = choose_half_life(trials)
        model, rule, val_f1, val_right = fits[chosen]
        proba_test = model.predict_proba(X.iloc[test])
        pred = rule.predict(proba_test)
        result.models[target] = model
        result.rules[target] = rule
        result.val_macro_f1[target] = val_f1
        result.val_right[target] = val_right
        result.half_life_days[target] = chosen
        result.half_life_scores[target] = {
            str(h): round(score, 4) for h, score in trials.items()
        }
        result.test_pred[target] = pred
        result.test_conf[target] = confidence(proba_test, pred)
    result.fit_seconds = time.perf_counter() - started
    return result


def _days(half_life: float | None) -> str:
    """Return a half-life as people read it: '30 d' or 'none'."""
    return "none" if half_life is None else f"{half_life:g} d"


def _candidate_half_lives(config: TrainingConfig) -> tuple[float | None, ...]:
    """Return the half-lives to try: the configured one, or the candidates."""
    if config.half_life_days == AUTO:
        return HALF_LIFE_CANDIDATES
    if isinstance(config.half_life_days, str):
        raise ValueError(
            f"The 'half_life_days' field must be a number of days, None or "
            f"{AUTO!r}. Got {config.half_life_days!r} instead."
        )
    return (config.half_life_days,)


def _fit_kinds(
    X: pd.DataFrame,
    y: dict[str, np.ndarray],
    parts: tuple[np.ndarray, np.ndarray, np.ndarray],
    bins: BinSet,
    config: TrainingConfig,
    created: pd.Series,
    progress: FitProgress,
) -> dict[str, KindResult]:
    """Fit every kind; the half-lives are chosen with the first kind, then reused.

    Trying every half-life costs one fit per candidate, which XGBoost pays in
    seconds and a network in minutes, so the later kinds take the first kind's
    choice per target.
    """
    candidates = _candidate_half_lives(config)
    kinds: dict[str, KindResult] = {}
    half_lives = {t: candidates for t in y}
    for kind in config.model_kinds:
        kinds[kind] = _fit_kind(
            kind, X, y, parts, bins, config, half_lives, created, progress
        )
        half_lives = {t: (h,) for t, h in kinds[kind].half_life_days.items()}
    return kinds


def _best_kind(kinds: dict[str, KindResult], target: str) -> str:
    """Return the kind with the best validation macro-F1 on ``target``."""
    return max(kinds, key=lambda kind: kinds[kind].val_macro_f1[target])


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
    (:func:`pipelines.training.cost_tuning.choose_price`)."""
    if config.delay_price != AUTO:
        price = float(config.delay_price)
        return bundle.cost.with_price(price), {"delay_price": price}
    return choose_price(bundle, frame.iloc[val], frame)


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
    parts = parts if parts is not None else _split(history, bins, config)
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
    kinds = _fit_kinds(
        X, y, fit_parts, bins, config, frame["creationdate"], FitProgress(progress)
    )
    y_test = {t: y[t][test_all] for t in y}
    for res in kinds.values():
        res.evaluation = _evaluate(y_test, res.test_pred, bins)
    served_kinds = {t: _best_kind(kinds, t) for t in y}
    cadence = _cadence(kinds, served_kinds, y, fit_parts, frame["creationdate"])
    served_pred = {t: kinds[served_kinds[t]].test_pred[t] for t in y}
    served_conf = {t: kinds[served_kinds[t]].test_conf[t] for t in y}
    served = _evaluate(y_test, served_pred, bins)
    coverage = {
        k: _coverage(r.test_conf, y_test, r.test_pred) for k, r in kinds.items()
    }
    coverage["served"] = _coverage(served_conf, y_test, served_pred)
    train_tasks = tasks.iloc[parts.train]
    frameworks, _ = split_transhome(train_tasks["transhome"])
    times = frame["creationdate"]
    split_info = {
        "split": config.split,
        "train_rows": int(len(parts.train)),
        "history_train_rows": int(history_train_rows),
        "val_rows": int(len(parts.val)),
        "test_rows": int(len(test_all)),
        "train_period": f"{times.iloc[parts.train].min()} .. "
        f"{times.iloc[parts.train].max()}",
        "test_period": f"{times.iloc[test_all].min()} .. {times.iloc[test_all].max()}",
        "half_life_days": {t: kinds[served_kinds[t]].half_life_days[t] for t in y},
        "retrain_every_days": cadence.days,
        "cadence": cadence.to_dict(),
    }
    bundle = Bundle(
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
        split_info["combination"] = bundle.combination.to_dict()
        bundle.info["combination"] = split_info["combination"]
    calibration = served_parts(
        bundle.combination, rules, proba, X, frame, y, bins, val, test_all
    )
    bundle.calibrators = fit_calibrators(calibration, config.calibration_method)
    bundle.metrics.update(calibration_metrics(calibration, bundle.calibrators))
    bundle.info["calibration_method"] = config.calibration_method
    bundle.cost, split_info["cost"] = _cost_settings(bundle, frame, parts.val, config)
    bundle.info["cost"] = split_info["cost"]
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
