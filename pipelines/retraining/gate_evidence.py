"""Measure on one test set what the champion gate judges: models, floors and noise.

The challenger, the current champion and two floors are scored on the SAME test
tasks of the new training run. Both bundles are scored as models: features, the
four classifiers and their tail rules, without the combination with the recency
rules (the run metrics of the bundle's version describe the same). The floors are
beaten or not by the challenger *as it serves* (``served.mean_accuracy``: with its
combination, what PanDA would get): the question they answer is whether the product
does better than the rule a site could run without it. The floors:

* ``majority``: the most frequent class of each target among the test tasks (an
  upper bound of any constant-class rule, so a hard floor to beat);
* ``best_recency``: per target, the best on these tasks of the field's recency
  rules (mean of the user's last two, key percentiles, largest ratio; the experts of
  :mod:`panda_predictor.core.decide.experts`), the majority class where a rule has no
  history to read.

The noise of each comparison is a paired bootstrap over test *days* (jobs of one
day are near-copies of each other, so resampling single tasks would understate it):
every resample scores both models on the same days, and the noise is half the
width of the 90 % interval of the difference. A model that cannot be scored makes
the evidence ``unscored``: the gate then promotes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from model_registry.gate import (
    CHAMPION,
    SCOUTS,
    SELF,
    SERVED_ACCURACY,
    SERVED_COST,
    SERVED_DELAY,
    GateEvidence,
    failed_jobs_metric,
    wasted_hours_metric,
)
from panda_predictor.core.assess.baselines import majority_class
from panda_predictor.core.assess.day_bootstrap import DayBootstrap, half_width
from panda_predictor.core.assess.evaluation import evaluate_targets
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.experts import CombinationParams
from panda_predictor.core.decide.recency_rules import rule_values
from panda_predictor.serving.loader import try_load_champion
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import Settings
from pipelines.training.dataset import LabelledHistory
from pipelines.training.served_replay import (
    BurstReplay,
    Replay,
    labelled_parts,
    replay_bursts,
    replay_decision,
)
from pipelines.training.train import TrainingResult, gate_metrics

log = logging.getLogger(__name__)

#: Floor names, as the gate's verdicts show them.
MAJORITY = "majority"
BEST_RECENCY = "best_recency"

Classes = dict[str, np.ndarray]


def metrics_of(y_test: Classes, predicted: Classes, bins: BinSet) -> dict[str, float]:
    """Return the gate's metrics of one set of predicted classes on the test tasks."""
    evaluation = evaluate_targets(
        y_test,
        {t: predicted[t] for t in y_test},
        n_classes={t: bins[t].n_classes for t in y_test},
    )
    return gate_metrics(evaluation)


def majority_classes(y_test: Classes) -> Classes:
    """Return, per target, the test set's most frequent class for every task."""
    return {t: majority_class(y, len(y)) for t, y in y_test.items()}


def best_recency_classes(
    features: Any, y_test: Classes, bins: BinSet, fallback: Classes
) -> tuple[Classes, dict[str, str]]:
    """Return per target the classes of the most accurate recency rule, and its name.

    ``features`` are the test tasks' history features (the challenger's pipeline);
    where a rule has no history the task gets ``fallback``'s class.
    """
    margin = CombinationParams().margin
    chosen: Classes = {}
    names: dict[str, str] = {}
    for target, truth in y_test.items():
        best = None
        for rule, values in rule_values(features, target, margin).items():
            classes = bins[target].assign(values)
            classes = np.where(classes >= 0, classes, fallback[target])
            accuracy = float(np.mean(classes == truth))
            if best is None or accuracy > best[0]:
                best = (accuracy, rule, classes)
        assert best is not None  # rule_values always names the rules
        names[target], chosen[target] = best[1], best[2]
    return chosen, names


def _metric_parts(
    y_test: Classes, predicted: Classes, bins: BinSet
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Return per gated metric its per-task numerator and denominator.

    Every gated metric is a ratio of sums over tasks, so a resample's value is the
    ratio of the day-weighted sums.
    """
    targets = list(y_test)
    n = len(next(iter(y_test.values())))
    ones = np.ones(n)
    hits = [(predicted[t] == y_test[t]).astype(float) for t in targets]
    parts = {"mean_accuracy": (np.mean(hits, axis=0), ones)}
    for t, hit in zip(targets, hits, strict=True):
        tail = (y_test[t] == bins[t].n_classes - 1).astype(float)
        parts[f"{t}.tail_recall"] = (hit * tail, tail)
        parts[f"{t}.under_allocation"] = (
            (predicted[t] < y_test[t]).astype(float),
            ones,
        )
    return parts


def noise_between(
    boot: DayBootstrap,
    a: Mapping[str, tuple[np.ndarray, np.ndarray]],
    b: Mapping[str, tuple[np.ndarray, np.ndarray]] | None,
) -> dict[str, float]:
    """Return per metric the half-width of the paired difference a - b (a alone)."""
    out = {}
    for metric, (num, den) in a.items():
        values = boot.resampled(num, den)
        if b is not None:
            values = values - boot.resampled(*b[metric])
        out[metric] = half_width(values)
    return out


def model_classes(
    predictor: Predictor, result: TrainingResult, history: LabelledHistory
) -> Classes:
    """Return the classes ``predictor``'s model and tail rules give the test tasks."""
    alone = Predictor(
        replace(predictor.bundle, combination=None),
        predictor.model_name,
        predictor.model_version,
    )
    _, chosen, _ = alone.classify(result.test_tasks, history.history)
    return {t: np.asarray(chosen[t]) for t in result.y_test}


Parts = dict[str, tuple[np.ndarray, np.ndarray]]


def replay_parts(replay: Replay, bursts: BurstReplay) -> tuple[Parts, Parts]:
    """Return per replay figure its per-task numerator and denominator, for the
    challenger and for the scouts.

    ``served.cost`` is the mean realized cost per task, ``served.delay_share``
    the share of tasks that keep their scouts (challenger only),
    ``served.<target>.failed_jobs`` the share of jobs with a failed attempt and
    ``served.<target>.wasted_hours`` the mean wasted hours per job in the burst
    replay (rows without a known label count in neither part).
    """
    ones = np.ones(len(replay.applied))
    mine: Parts = {
        SERVED_COST: (replay.cost, ones),
        SERVED_DELAY: ((~replay.applied).astype(float), ones),
    }
    scouts: Parts = {SERVED_COST: (replay.scouts_cost, ones)}
    for t, known in bursts.known.items():
        counted = known.astype(float)
        for side, outcome in ((mine, bursts.served[t]), (scouts, bursts.scouts[t])):
            failed, wasted = np.zeros(len(known)), np.zeros(len(known))
            failed[known] = outcome.failed
            wasted[known] = outcome.wasted_hours
            side[failed_jobs_metric(t)] = (failed, counted)
            side[wasted_hours_metric(t)] = (wasted, counted)
    return mine, scouts


def ratio(num: np.ndarray, den: np.ndarray) -> float:
    """Return ``sum(num) / sum(den)``; 0 when nothing is counted (no task skipped
    its scouts, so none was short)."""
    bottom = float(np.sum(den))
    return float(np.sum(num)) / bottom if bottom > 0 else 0.0


def _replay_evidence(
    replay: Replay, bursts: BurstReplay, boot: DayBootstrap
) -> tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, float]]:
    """Return the replay figures, the scouts' figures, their own noise and the
    noise of each figure against the scouts' (paired: the same days in every
    resample)."""
    mine, scouts = replay_parts(replay, bursts)
    figures = {metric: ratio(num, den) for metric, (num, den) in mine.items()}
    versus = noise_between(boot, {m: mine[m] for m in scouts}, scouts)
    return (
        figures,
        {metric: ratio(num, den) for metric, (num, den) in scouts.items()},
        noise_between(boot, mine, None),
        versus,
    )


def _champion_classes(
    settings: Settings, result: TrainingResult, history: LabelledHistory
) -> tuple[Classes | None, str | None, str | None]:
    """Return the champion's classes on the test tasks, or why there are none.

    Returns ``(classes, incomparable, unscored)``; all ``None`` when there is no
    champion.
    """
    try:
        champion = try_load_champion(settings)
    except Exception as exc:  # noqa: BLE001  recorded: the gate then promotes nothing
        log.exception("The champion cannot be loaded to score the new test data")
        return None, None, f"the champion could not be loaded ({_say(exc)})"
    if champion is None:
        return None, None, None
    own, new = champion.bundle.bins, result.bundle.bins
    differing = [t for t in result.y_test if own[t].edges != new[t].edges]
    if differing:
        return None, f"other class edges for {', '.join(differing)}", None
    try:
        return model_classes(champion, result, history), None, None
    except Exception as exc:  # noqa: BLE001  recorded: the gate then promotes nothing
        log.exception("The champion cannot score the new test data")
        return None, None, f"the champion could not be scored ({_say(exc)})"


def _say(exc: BaseException) -> str:
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"


def _floor_evidence(
    y_test: Classes,
    classes: Classes,
    bins: BinSet,
    boot: DayBootstrap,
    parts: Mapping[str, tuple[np.ndarray, np.ndarray]],
    served_parts: Mapping[str, tuple[np.ndarray, np.ndarray]],
) -> tuple[dict[str, float], dict[str, float]]:
    """Return a floor's metrics and the noise of the challenger's lead over it."""
    floor_parts = _metric_parts(y_test, classes, bins)
    noise = noise_between(boot, parts, floor_parts)
    noise.update(
        noise_between(
            boot, served_parts, {SERVED_ACCURACY: floor_parts["mean_accuracy"]}
        )
    )
    metrics = metrics_of(y_test, classes, bins)
    # A floor serves as it predicts: no model, no combination.
    metrics[SERVED_ACCURACY] = metrics["mean_accuracy"]
    return metrics, noise


def gate_evidence(
    settings: Settings,
    result: TrainingResult,
    history: LabelledHistory,
    tail_recall_target: float | None,
) -> GateEvidence:
    """Score challenger, champion and floors on the run's test tasks, with noise.

    Parameters
    ----------
    settings:
        Where the current champion is.
    result:
        The new training run (its test tasks, labels and bundle).
    history:
        The labelled history the features read.
    tail_recall_target:
        Recall of the largest class the gate requires (the tail rules' target).
    """
    y_test, bins = result.y_test, result.bundle.bins
    try:
        new = Predictor(result.bundle, settings.model_name, "new")
        challenger = model_classes(new, result, history)
        classified = labelled_parts(new, result.test_tasks, history.history)
        served = {t: np.asarray(classified.chosen[t]) for t in y_test}
        decided = new.decide(classified, new.in_domain(result.test_tasks))
        replay = replay_decision(new, classified, decided, result.test_tasks)
        bursts = replay_bursts(new, classified, decided, result.test_tasks)
        majority = majority_classes(y_test)
        features = new.features(result.test_tasks, history.history)
        recency, rules = best_recency_classes(features, y_test, bins, majority)
    except Exception as exc:  # noqa: BLE001  recorded: the gate then promotes nothing
        log.exception("The new model or its floors cannot be scored")
        return GateEvidence(
            dict(result.bundle.metrics),
            unscored=f"the new model or its floors could not be scored ({_say(exc)})",
        )
    challenger_metrics = metrics_of(y_test, challenger, bins)
    challenger_metrics[SERVED_ACCURACY] = metrics_of(y_test, served, bins)[
        "mean_accuracy"
    ]
    log.info("Best recency rule per target on the test tasks: %s", rules)
    champion, incomparable, unscored = _champion_classes(settings, result, history)
    boot = DayBootstrap(result.test_tasks["creationdate"].dt.floor("D"))
    parts = _metric_parts(y_test, challenger, bins)
    served_parts = {
        SERVED_ACCURACY: _metric_parts(y_test, served, bins)["mean_accuracy"]
    }
    floors = {MAJORITY: majority, BEST_RECENCY: recency}
    figures, scouts, replay_noise, scouts_noise = _replay_evidence(replay, bursts, boot)
    challenger_metrics.update(figures)
    log.info(
        "Replay of the served decision on the test tasks: %s; scouts: %s",
        {k: round(v, 4) for k, v in figures.items()},
        {k: round(v, 4) for k, v in scouts.items()},
    )
    noise = {SELF: {**noise_between(boot, parts, None), **replay_noise}}
    noise[SCOUTS] = scouts_noise
    floor_metrics = {}
    for name, classes in floors.items():
        floor_metrics[name], noise[name] = _floor_evidence(
            y_test, classes, bins, boot, parts, served_parts
        )
    champion_metrics = None
    if champion is not None:
        champion_metrics = metrics_of(y_test, champion, bins)
        noise[CHAMPION] = noise_between(
            boot, parts, _metric_parts(y_test, champion, bins)
        )
    floor_metrics[SCOUTS] = scouts
    return GateEvidence(
        challenger=challenger_metrics,
        champion=champion_metrics,
        floors=floor_metrics,
        noise=noise,
        tail_recall_target=tail_recall_target,
        unscored=unscored,
        incomparable=incomparable,
    )
