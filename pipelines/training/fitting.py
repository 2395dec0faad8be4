"""Fit every model kind for every target, choosing each target's half-life.

The models learn from the training part and stop early on the validation part; each
target's tail rule is tuned on the validation part too. With ``half_life_days:
auto`` the candidate half-lives are compared on the first kind (on a sample of a
large training part) and the later kinds reuse its choice per target.
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
    evaluate_target,
)
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.tail_rule import TailDecisionRule, confidence
from panda_predictor.models import ResourceClassifier, model_class
from panda_predictor.models.xgb import QuantisedParts, XGBoostResourceClassifier
from pipelines.training.config import AUTO, TrainingConfig
from pipelines.training.fit_progress import FitProgress
from pipelines.training.self_tuning import HALF_LIFE_CANDIDATES, choose_half_life

log = logging.getLogger(__name__)


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


def fit_kinds(
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


def best_kind(kinds: dict[str, KindResult], target: str) -> str:
    """Return the kind with the best validation macro-F1 on ``target``."""
    return max(kinds, key=lambda kind: kinds[kind].val_macro_f1[target])
