"""Score class predictions per target and for the four targets together.

Pure numpy, no scikit-learn: the figures match scikit-learn's ``precision_recall_
fscore_support(..., labels=range(K), zero_division=0)`` and ``confusion_matrix``.

Zero division: a class never predicted has precision 0, a class absent from
``y_true`` has recall 0, and F1 is 0 when precision + recall is 0. The macro-F1
averages over the classes that occur in ``y_true`` or ``y_pred`` (scikit-learn's
default when no labels are given), so a class that nobody saw or predicted does not
drag the average down. Classes are ordered: predicting a smaller class than the true
one is an *under-allocation* (jobs may fail), a larger one an *over-allocation*
(resources wasted).

Results are dataclasses whose ``to_dict()`` gives flat names such as
``ramcount.accuracy`` or ``joint.exact_match_rate``, ready for MLflow's ``log_metrics``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _as_classes(name: str, y: Any) -> np.ndarray:
    """Return ``y`` as a 1-D int array of non-negative classes, or raise."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(
            f"The '{name}' field must be a 1-D array of classes. "
            f"Got shape {arr.shape} instead."
        )
    if arr.size and (
        not np.issubdtype(arr.dtype, np.number)
        or not np.all(np.equal(np.mod(arr, 1), 0))
        or arr.min() < 0
    ):
        raise ValueError(
            f"The '{name}' field must hold non-negative integer classes. "
            f"Got {arr[:5].tolist()}... instead."
        )
    return arr.astype(int)


def _check_pair(y_true: Any, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return both label arrays after checking they are non-empty and aligned."""
    t = _as_classes("y_true", y_true)
    p = _as_classes("y_pred", y_pred)
    if t.size == 0 or t.size != p.size:
        raise ValueError(
            "The 'y_true' and 'y_pred' fields must be non-empty and of equal length. "
            f"Got {t.size} and {p.size} instead."
        )
    return t, p


def confusion_matrix(
    y_true: Any, y_pred: Any, n_classes: int | None = None
) -> np.ndarray:
    """Return the (K, K) count matrix: row = true class, column = predicted class."""
    t, p = _check_pair(y_true, y_pred)
    k = int(max(t.max(), p.max()) + 1) if n_classes is None else int(n_classes)
    if k <= max(t.max(), p.max()):
        raise ValueError(
            "The 'n_classes' field must exceed every class seen "
            f"({max(t.max(), p.max())}). Got {n_classes} instead."
        )
    return np.bincount(t * k + p, minlength=k * k).reshape(k, k)


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Divide element-wise, giving 0 where the denominator is 0."""
    num = np.asarray(num, float)
    den = np.asarray(den, float)
    return np.divide(num, den, out=np.zeros_like(num), where=den != 0)


@dataclass
class TargetEvaluation:
    """Metrics of one target's predictions; per-class arrays are indexed by class."""

    target: str
    n_samples: int
    accuracy: float
    macro_f1: float
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    support: np.ndarray
    confusion: np.ndarray
    under_allocation_rate: float
    over_allocation_rate: float
    class_names: list[str] = field(default_factory=list)

    @property
    def n_classes(self) -> int:
        """Number of classes the matrices cover."""
        return int(self.confusion.shape[0])

    def to_dict(self) -> dict[str, float]:
        """Return flat scalar metrics named ``<target>.<metric>`` (no matrix cells)."""
        p = self.target
        out = {
            f"{p}.accuracy": self.accuracy,
            f"{p}.macro_f1": self.macro_f1,
            f"{p}.under_allocation_rate": self.under_allocation_rate,
            f"{p}.over_allocation_rate": self.over_allocation_rate,
            f"{p}.n_samples": float(self.n_samples),
        }
        for k in range(self.n_classes):
            out[f"{p}.class_{k}.precision"] = float(self.precision[k])
            out[f"{p}.class_{k}.recall"] = float(self.recall[k])
            out[f"{p}.class_{k}.f1"] = float(self.f1[k])
            out[f"{p}.class_{k}.support"] = float(self.support[k])
        return {k: float(v) for k, v in out.items()}

    def to_json(self) -> dict[str, Any]:
        """Return every field, the confusion matrix included, as plain lists."""
        return {
            "target": self.target,
            "n_samples": self.n_samples,
            "accuracy": self.accuracy,
            "macro_f1": self.macro_f1,
            "precision": self.precision.tolist(),
            "recall": self.recall.tolist(),
            "f1": self.f1.tolist(),
            "support": self.support.tolist(),
            "confusion": self.confusion.tolist(),
            "under_allocation_rate": self.under_allocation_rate,
            "over_allocation_rate": self.over_allocation_rate,
            "class_names": list(self.class_names),
        }


def evaluate_target(
    y_true: Any,
    y_pred: Any,
    n_classes: int | None = None,
    target: str = "target",
    class_names: Sequence[str] | None = None,
) -> TargetEvaluation:
    """Score one target's class predictions against the truth.

    :param y_true: (n,) true classes.
    :param y_pred: (n,) predicted classes.
    :param n_classes: K; default: one more than the largest class seen.
    :param target: name used as prefix in :meth:`TargetEvaluation.to_dict`.
    :param class_names: optional labels of the classes, e.g. their bin ranges.
    """
    t, p = _check_pair(y_true, y_pred)
    cm = confusion_matrix(t, p, n_classes)
    k = cm.shape[0]
    names = [str(c) for c in range(k)] if class_names is None else list(class_names)
    if len(names) != k:
        raise ValueError(
            f"The 'class_names' field must name all {k} classes. "
            f"Got {len(names)} names instead."
        )
    tp = np.diag(cm).astype(float)
    support = cm.sum(axis=1)
    predicted = cm.sum(axis=0)
    precision = _safe_div(tp, predicted)
    recall = _safe_div(tp, support)
    f1 = _safe_div(2 * precision * recall, precision + recall)
    present = (support > 0) | (predicted > 0)
    return TargetEvaluation(
        target=target,
        n_samples=int(t.size),
        accuracy=float(np.mean(t == p)),
        macro_f1=float(f1[present].mean()),
        precision=precision,
        recall=recall,
        f1=f1,
        support=support,
        confusion=cm,
        under_allocation_rate=float(np.mean(p < t)),
        over_allocation_rate=float(np.mean(p > t)),
        class_names=names,
    )


def all_correct(y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> np.ndarray:
    """Return, per task, whether every target was predicted right."""
    hits = _hits_matrix(y_true, y_pred)
    return np.asarray(hits.all(axis=1))


def all_sufficient(y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> np.ndarray:
    """Return, per task, whether no target was under-allocated (predicted >= true).

    This is the event that :func:`panda_predictor.core.decide.tail_rule.confidence`
    estimates, so it is the natural "right" for a coverage curve about job safety.
    """
    _hits_matrix(y_true, y_pred)  # same checks as for exact hits
    enough = [
        np.asarray(y_pred[t]).astype(int) >= np.asarray(y_true[t]).astype(int)
        for t in y_true
    ]
    return np.asarray(np.column_stack(enough).all(axis=1))


def _hits_matrix(y_true: Mapping[str, Any], y_pred: Mapping[str, Any]) -> np.ndarray:
    """Return the (n, n_targets) boolean matrix of right predictions."""
    if set(y_true) != set(y_pred) or not y_true:
        raise ValueError(
            "The 'y_true' and 'y_pred' fields must name the same, non-empty set of "
            f"targets. Got {sorted(y_true)} and {sorted(y_pred)} instead."
        )
    pairs = [_check_pair(y_true[name], y_pred[name]) for name in y_true]
    lengths = {t.size for t, _ in pairs}
    if len(lengths) != 1:
        raise ValueError(
            "Every target must have one label per task. "
            f"Got lengths {sorted(lengths)} instead."
        )
    return np.column_stack([t == p for t, p in pairs])


@dataclass
class MultiTargetEvaluation:
    """Per-target metrics plus how often several targets are right together."""

    targets: dict[str, TargetEvaluation]
    exact_match_rate: float
    at_least_right: dict[int, float]
    mean_accuracy: float
    n_samples: int

    def to_dict(self) -> dict[str, float]:
        """Return all scalar metrics under flat names like ``joint.mean_accuracy``."""
        out: dict[str, float] = {}
        for ev in self.targets.values():
            out.update(ev.to_dict())
        out["joint.exact_match_rate"] = float(self.exact_match_rate)
        for k, rate in self.at_least_right.items():
            out[f"joint.at_least_{k}_right"] = float(rate)
        out["joint.mean_accuracy"] = float(self.mean_accuracy)
        out["joint.n_samples"] = float(self.n_samples)
        return out


def evaluate_targets(
    y_true: Mapping[str, Any],
    y_pred: Mapping[str, Any],
    n_classes: Mapping[str, int] | None = None,
    class_names: Mapping[str, Sequence[str]] | None = None,
) -> MultiTargetEvaluation:
    """Score several targets of the same tasks, each alone and all together.

    ``at_least_right[k]`` is the share of tasks with at least k targets right, for
    k = 1 .. number of targets - 1 (k = all is the exact-match rate).

    :param y_true: target name -> (n,) true classes, rows aligned across targets.
    :param y_pred: target name -> (n,) predicted classes.
    :param n_classes: optional target name -> K.
    :param class_names: optional target name -> class labels.
    """
    hits = _hits_matrix(y_true, y_pred)
    n_classes = n_classes or {}
    class_names = class_names or {}
    per_target = {
        name: evaluate_target(
            y_true[name],
            y_pred[name],
            n_classes.get(name),
            target=name,
            class_names=class_names.get(name),
        )
        for name in y_true
    }
    n_right = hits.sum(axis=1)
    return MultiTargetEvaluation(
        targets=per_target,
        exact_match_rate=float(np.mean(n_right == hits.shape[1])),
        at_least_right={
            k: float(np.mean(n_right >= k)) for k in range(1, hits.shape[1])
        },
        mean_accuracy=float(np.mean([ev.accuracy for ev in per_target.values()])),
        n_samples=int(hits.shape[0]),
    )
