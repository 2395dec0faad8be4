"""Choose how the model and the recency rules are combined, on the deployment's past.

The combination (:mod:`panda_predictor.core.decide.experts`) has a few knobs: how fast a
key forgets (``decay``), which key keeps a record (the user, or the user's
transformation) and how many finished tasks a key needs before its own record
decides. Instead of constants tuned on our development logs, each training run
replays the combination over its own validation part (tasks the model did not fit
on, in time order, each judged only on records known before it) for every candidate
and keeps the one with the best mean macro-F1 over the targets among those that no
rule beats in under- and over-allocation at once (the benchmark's goal, both
halves; if every candidate is beaten, the best macro-F1).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.assess.evaluation import evaluate_target
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.experts import (
    RECORD_KEYS,
    CombinationParams,
    Combined,
    RecordScores,
    TrackRecord,
    follow,
    record_scores,
)
from panda_predictor.core.decide.recency_rules import expert_classes, rule_values
from panda_predictor.core.features.history import HISTORY_GROUPS, group_key, to_naive_ns

#: The candidates every training run tries (all combinations of these values).
DECAYS: tuple[float, ...] = (0.5, 0.8, 0.95)
MIN_RECORDS: tuple[int, ...] = (1, 3)
#: Margins of the percentile rules: none suits tightly packed classes (a job log
#: whose memory sits within a few per cent), 10 % the usual headroom.
MARGINS: tuple[float, ...] = (0.0, 0.10)
#: Plain accuracy, or accuracy weighted by the rarity of the true class.
BALANCED: tuple[bool, ...] = (False, True)


def candidates() -> list[CombinationParams]:
    """Return every combination setting a training run tries."""
    grid = itertools.product(DECAYS, RECORD_KEYS, MIN_RECORDS, MARGINS, BALANCED)
    return [
        CombinationParams(decay=d, key=k, min_record=m, margin=g, balanced=b)
        for d, k, m, g, b in grid
    ]


def tune_combination(
    rules: Mapping[str, Any],
    models: Mapping[str, Any],
    X_val: pd.DataFrame,
    val_tasks: pd.DataFrame,
    y_val: Mapping[str, np.ndarray],
    bins: BinSet,
    proba: Mapping[str, np.ndarray] | None = None,
) -> CombinationParams:
    """Return the candidate with the best mean macro-F1 on the validation tasks.

    Parameters: ``rules`` and ``models`` per target (tail rule, classifier);
    ``X_val`` their features; ``val_tasks`` the same rows of the labelled
    history (key columns, ``creationdate``, ``labels_known_at``); ``y_val`` the
    true classes (-1: unknown); ``proba`` the models' probabilities on ``X_val``
    when the caller has them already.
    """
    created = to_naive_ns(val_tasks["creationdate"], "creationdate").to_numpy()
    known_at = to_naive_ns(val_tasks["labels_known_at"], "labels_known_at").to_numpy()
    experts: dict[tuple[str, float], np.ndarray] = {}
    for target, model in models.items():
        p = model.predict_proba(X_val) if proba is None else proba[target]
        model_class = rules[target].predict(p)
        for margin in MARGINS:
            values = rule_values(X_val, target, margin)
            experts[target, margin] = expert_classes(
                model_class, values, bins[target].assign
            )
    keys = {
        key: group_key(val_tasks, HISTORY_GROUPS[key]).to_numpy(object)
        for key in RECORD_KEYS
    }
    tried: list[tuple[CombinationParams, float, bool]] = []
    for params in candidates():
        if params.min_record != MIN_RECORDS[0]:
            continue  # the records do not depend on it: tried below
        records = {
            target: record_scores(
                keys[params.key],
                created,
                TrackRecord(
                    experts[target, params.margin],
                    y_val[target],
                    keys[params.key],
                    known_at,
                ),
                params,
            )
            for target in models
        }
        for min_record in MIN_RECORDS:
            candidate = replace(params, min_record=min_record)
            tried.append(_judge(candidate, records, experts, y_val, bins))
    # Ahead of the rules in macro-F1 is half the goal; the other half is that no
    # rule allocates better in both directions at once: prefer such candidates.
    undominated = [t for t in tried if t[2]] or tried
    return max(undominated, key=lambda t: t[1])[0]


def replay(
    params: CombinationParams,
    rules: Mapping[str, Any],
    proba: Mapping[str, np.ndarray],
    X: pd.DataFrame,
    tasks: pd.DataFrame,
    y: Mapping[str, np.ndarray],
    bins: BinSet,
) -> dict[str, Combined]:
    """Return, per target, the combination's answer on labelled tasks in time order.

    Each task is judged on the records of the tasks before it (labels known before
    its creation), as serving judges a new task with that history: what
    :func:`tune_combination` replays for one candidate, here for ``params``. The
    answer's ``confidence`` is the followed expert's recent weighted accuracy.

    Parameters: ``proba`` the models' probabilities on ``X``; ``tasks`` the same
    rows of the labelled history; ``y`` their true classes (-1: unknown).
    """
    created = to_naive_ns(tasks["creationdate"], "creationdate").to_numpy()
    known_at = to_naive_ns(tasks["labels_known_at"], "labels_known_at").to_numpy()
    keys = group_key(tasks, HISTORY_GROUPS[params.key]).to_numpy(object)
    out = {}
    for target, p in proba.items():
        matrix = expert_classes(
            rules[target].predict(p),
            rule_values(X, target, params.margin),
            bins[target].assign,
        )
        record = TrackRecord(matrix, y[target], keys, known_at)
        out[target] = follow(
            matrix, record_scores(keys, created, record, params), params
        )
    return out


def allocation(classes: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """Return the under-allocation rate and the mean classes given too many."""
    return (
        float(np.mean(classes < truth)),
        float(np.mean(np.maximum(classes - truth, 0))),
    )


def _judge(
    params: CombinationParams,
    records: Mapping[str, RecordScores],
    experts: Mapping[tuple[str, float], np.ndarray],
    y_val: Mapping[str, np.ndarray],
    bins: BinSet,
) -> tuple[CombinationParams, float, bool]:
    """Return the candidate, its mean macro-F1 over targets (-inf: no target
    scored) and whether no rule beats it in under- and over-allocation at once."""
    scores, undominated = [], True
    for target, record in records.items():
        truth = y_val[target]
        scored = truth >= 0
        if not scored.any():
            continue
        matrix = experts[target, params.margin]
        answer = follow(matrix, record, params)
        scores.append(
            evaluate_target(
                truth[scored], answer.classes[scored], bins[target].n_classes, target
            ).macro_f1
        )
        under, over = allocation(answer.classes[scored], truth[scored])
        for rule in range(1, matrix.shape[1]):
            # Where a rule has nothing to say, it falls back (here: on the model).
            said = np.where(matrix[:, rule] >= 0, matrix[:, rule], matrix[:, 0])
            r_under, r_over = allocation(said[scored], truth[scored])
            if r_under < under and r_over < over:
                undominated = False
    mean = float(np.mean(scores)) if scores else -np.inf
    return params, mean, undominated
