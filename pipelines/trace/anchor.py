"""Anchor the model to a recency rule: the model overrides the rule only when sure.

On logs whose users change behaviour from week to week (METACENTRUM-2009-2: one
user's burst of short jobs is 29 % of a retraining window and 2 % of the month
after it), a classifier learns the mapping "recency statistics -> class" of its
training window, and that mapping moves with the bursts. A recency rule ("the
75th percentile of the same user's last jobs") has no mapping to learn, so it does
not move. The anchored row mixes both:

    score(c) = (1 - w) * p_model(c) + w * [c == rule class]

and writes the class with the highest score. With weight w the model overrides the
rule only where it gives another class at least ``w / (1 - w)`` more probability
than the rule's class (0.25 at the default w = 0.2); elsewhere the rule's class is
written. The rule is the baseline with the best macro-F1 on the validation jobs of
the retraining (jobs that finished before the test period, never the period itself),
so the choice cannot see test data. w = 0.2 was settled on the *development* part
of the six logs (``benchmark --dev``: the real test parts dropped), where it was at
least as good as the plain model on every file tried; see docs/evaluation.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from panda_predictor.core.evaluation import evaluate_target

#: Weight of the rule's one-hot vote (see module doc).
ANCHOR_WEIGHT = 0.2


def choose_anchor(y_val: Any, baselines_val: dict[str, Any], n_classes: int) -> str:
    """Return the baseline with the best macro-F1 on the validation jobs.

    Ties go to the first name in sorted order, so the choice is reproducible.

    :param y_val: (n,) true classes of the validation jobs.
    :param baselines_val: baseline name -> (n,) its classes for the same jobs.
    :param n_classes: number of classes.
    """
    if not baselines_val:
        raise ValueError(
            "The 'baselines_val' field must name at least one baseline. Got none."
        )
    y = np.asarray(y_val, dtype=np.int64)
    if y.size == 0:
        raise ValueError("The 'y_val' field must hold at least one job. Got none.")
    scores = {
        name: evaluate_target(y, np.asarray(c), n_classes=n_classes).macro_f1
        for name, c in baselines_val.items()
    }
    return min(sorted(scores), key=lambda name: -scores[name])


def anchored_class(proba: Any, rule_classes: Any, weight: float) -> np.ndarray:
    """Return, per row, the arg-max of ``(1 - weight) * proba + weight * onehot(rule)``.

    :param proba: (n, K) model probabilities.
    :param rule_classes: (n,) the rule's class per row.
    :param weight: the rule's weight, in [0, 1): 0 is the plain arg-max.
    """
    p = np.asarray(proba, dtype=float)
    rule = np.asarray(rule_classes, dtype=np.int64)
    if p.ndim != 2 or rule.shape != (p.shape[0],):
        raise ValueError(
            "The 'proba' and 'rule_classes' fields must be an (n, K) and an (n,) "
            f"array. Got shapes {p.shape} and {rule.shape} instead."
        )
    if not 0.0 <= weight < 1.0:
        raise ValueError(
            f"The 'weight' field must be in [0, 1). Got {weight!r} instead."
        )
    if rule.size and (rule.min() < 0 or rule.max() >= p.shape[1]):
        raise ValueError(
            f"The 'rule_classes' field must hold classes 0..{p.shape[1] - 1}. "
            f"Got values from {rule.min()} to {rule.max()} instead."
        )
    score = (1.0 - weight) * p
    score[np.arange(p.shape[0]), rule] += weight
    return np.argmax(score, axis=1).astype(np.int64)
