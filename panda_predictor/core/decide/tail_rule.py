"""Turn class probabilities into decisions: tail thresholds, confidence, scouts or not.

Classes are ordered integers ``0..K-1``; a larger class means more resource. Missing
the largest classes (the *tail*) is the costly error: a task whose jobs need more
memory than requested fails, while one that asks for a bit too much only wastes some
slots. So :class:`TailDecisionRule` lowers the bar for the tail classes until their
recall reaches a target, tuned on validation data only, and reports the precision that
costs. :func:`confidence` says how sure a prediction is that the chosen class is
*enough*. What is written, and whether the scouts are kept, is the cost choice's
(:class:`~panda_predictor.core.decide.scout_policy.CostPolicy`), not a confidence
threshold; the coverage curve below is kept as a report of the model.

Everything here is pure numpy; the core warns (``warnings``) instead of logging.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from panda_predictor.core.decide import row_math

# The one error of every unfitted estimator; re-exported for the rule's callers.
from panda_predictor.core.fitted import NotFittedError as NotFittedError
from panda_predictor.core.fitted import check_is_fitted
from panda_predictor.core.reason_text import compared, number

#: Threshold used for a tail class that has no sample in the validation data. It is
#: deliberately low (conservative): the tail class is chosen as soon as the model
#: gives it one chance in five, which over-allocates rather than under-allocates.
DEFAULT_FALLBACK_THRESHOLD = 0.2
#: What to call before using a tail rule or a calibrator: both learn on the validation
#: split's probabilities, so their "not fitted" messages say the same.
FIT_ON_VALIDATION = "Call 'fit' with validation probabilities and labels first."


def _check_proba(proba: Any, n_classes: int | None = None) -> np.ndarray:
    """Return ``proba`` as a float (n, K) array after checking its shape and values."""
    arr = np.asarray(proba, dtype=float)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError(
            "The 'proba' field must be a 2-D array of shape (n_samples, n_classes) "
            f"with at least 2 classes. Got shape {arr.shape} instead."
        )
    if n_classes is not None and arr.shape[1] != n_classes:
        raise ValueError(
            f"The 'proba' field must have {n_classes} columns, as at fit time. "
            f"Got {arr.shape[1]} instead."
        )
    # min >= 0 fails on NaN and -inf, max < inf on inf: two reductions, not four
    # (called as ufunc reductions: one task's probabilities are checked often);
    # one task's row is checked on plain floats, cheaper than either reduction.
    if arr.shape[0] == 1:
        valid = all(0.0 <= v < math.inf for v in arr[0].tolist())
    else:
        valid = not arr.size or bool(
            np.minimum.reduce(arr, axis=None) >= 0.0
            and np.maximum.reduce(arr, axis=None) < math.inf
        )
    if not valid:
        raise ValueError(
            "The 'proba' field must hold finite, non-negative probabilities. "
            "Got NaN, infinite or negative values instead."
        )
    return arr


def _check_labels(y: Any, n_samples: int, n_classes: int) -> np.ndarray:
    """Return ``y`` as an int array after checking length and class range."""
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n_samples:
        raise ValueError(
            f"The 'y' field must be a 1-D array of {n_samples} class labels. "
            f"Got shape {arr.shape} instead."
        )
    if arr.size and (
        (arr.dtype.kind not in "iu" and not np.all(np.equal(np.mod(arr, 1), 0)))
        or arr.min() < 0
        or arr.max() >= n_classes
    ):
        raise ValueError(
            f"The 'y' field must hold integer classes in 0..{n_classes - 1}. "
            f"Got values from {arr.min()} to {arr.max()} instead."
        )
    return arr.astype(int)


def cumulative_from_top(proba: Any) -> np.ndarray:
    """Return P(class >= k) for every k: column k sums columns k..K-1 of ``proba``."""
    return _from_top(_check_proba(proba))


def _from_top(arr: np.ndarray) -> np.ndarray:
    return np.cumsum(arr[:, ::-1], axis=1)[:, ::-1]


def confidence(proba: Any, chosen: Any) -> np.ndarray:
    """Return P(true class <= chosen class): the chance the chosen class is enough.

    Over-allocation is harmless for the job, so a prediction is "safe" when the true
    class is the chosen one or any smaller one; this is the cumulative probability up
    to and including the chosen class (clipped to [0, 1] against rounding).

    :param proba: (n, K) class probabilities.
    :param chosen: (n,) chosen classes.
    """
    arr = _check_proba(proba)
    cls = _check_labels(chosen, arr.shape[0], arr.shape[1])
    cum = np.cumsum(arr, axis=1)
    return np.clip(cum[np.arange(arr.shape[0]), cls], 0.0, 1.0)


def _recall_precision(y: np.ndarray, pred: np.ndarray, k: int) -> tuple[float, float]:
    """Return (recall, precision) of class ``k``; 0/0 counts as 0."""
    tp = float(np.sum((y == k) & (pred == k)))
    support = float(np.sum(y == k))
    predicted = float(np.sum(pred == k))
    return (tp / support if support else 0.0, tp / predicted if predicted else 0.0)


class TailDecisionRule:
    """Choose tail classes on a lowered threshold so their recall reaches a target.

    From the largest tail class down, class k is predicted when P(class >= k) >= t_k;
    a task that takes no tail class gets the argmax among the lower classes. ``fit``
    sees only validation data, so the test set stays untouched.

    :param recall_target: recall each tail class must reach on validation data.
    :param n_tail_classes: how many of the top classes are tail classes.
    :param fallback_threshold: threshold of a tail class absent from validation data.
    :param min_precision: the precision of a tail class may not fall below this on
        validation; when the recall target would need more, the rule settles for the
        highest recall that keeps it (``report_[k]["limited_by_precision"]``). Without
        this floor a model that cannot tell the tail apart would send nearly every
        task to the largest class.
    """

    def __init__(
        self,
        recall_target: float = 0.95,
        n_tail_classes: int = 1,
        fallback_threshold: float = DEFAULT_FALLBACK_THRESHOLD,
        min_precision: float = 0.0,
    ) -> None:
        self.recall_target = recall_target
        self.n_tail_classes = n_tail_classes
        self.fallback_threshold = fallback_threshold
        self.min_precision = min_precision

    def _validate_params(self, n_classes: int) -> None:
        """Check the constructor arguments against the number of classes."""
        if not 0.0 < float(self.recall_target) <= 1.0:
            raise ValueError(
                "The 'recall_target' field must be in (0, 1]. "
                f"Got {self.recall_target!r} instead."
            )
        if (
            isinstance(self.n_tail_classes, bool)
            or not isinstance(self.n_tail_classes, int | np.integer)
            or not 1 <= self.n_tail_classes < n_classes
        ):
            raise ValueError(
                f"The 'n_tail_classes' field must be an integer in 1..{n_classes - 1} "
                f"for {n_classes} classes. Got {self.n_tail_classes!r} instead."
            )
        if not 0.0 <= float(self.min_precision) < 1.0:
            raise ValueError(
                "The 'min_precision' field must be in [0, 1). "
                f"Got {self.min_precision!r} instead."
            )
        if not 0.0 <= float(self.fallback_threshold) <= 1.0:
            raise ValueError(
                "The 'fallback_threshold' field must be in [0, 1]. "
                f"Got {self.fallback_threshold!r} instead."
            )

    def fit(self, proba_val: Any, y_val: Any) -> TailDecisionRule:
        """Tune one threshold per tail class on validation probabilities and labels.

        For each tail class, from the largest down and given the thresholds above it,
        pick the largest threshold that still catches ``recall_target`` of the class:
        the largest threshold predicts the class least often, so it costs the least
        precision. If the target cannot be reached (higher tail classes already took
        too many of its samples) the threshold catches every sample left, with a
        warning; a class with no validation sample gets ``fallback_threshold``.
        """
        proba = _check_proba(proba_val)
        n, n_classes = proba.shape
        y = _check_labels(y_val, n, n_classes)
        if n == 0:
            raise ValueError(
                "The 'proba_val' field must hold at least one sample. Got 0 instead."
            )
        self._validate_params(n_classes)
        cum = cumulative_from_top(proba)
        claimed = np.zeros(n, dtype=bool)
        thresholds: dict[int, float] = {}
        fallbacks: list[int] = []
        self.limited_classes_: list[int] = []
        for k in range(n_classes - 1, n_classes - 1 - self.n_tail_classes, -1):
            members = y == k
            if not members.any():
                warnings.warn(
                    f"Tail class {k} has no sample in the validation data; using the "
                    f"conservative fallback threshold {self.fallback_threshold}.",
                    UserWarning,
                    stacklevel=2,
                )
                thresholds[k] = float(self.fallback_threshold)
                fallbacks.append(k)
            else:
                thresholds[k] = self._tune_one(k, cum[:, k], members, claimed)
                floor = self._precision_floor(cum[:, k], members, claimed)
                if floor > thresholds[k]:
                    thresholds[k] = floor
                    self.limited_classes_.append(k)
            claimed |= cum[:, k] >= thresholds[k]
        self.n_classes_ = n_classes
        self.thresholds_ = thresholds
        self.fallback_classes_ = fallbacks
        self.report_ = self._make_report(proba, y)
        return self

    def _tune_one(
        self, k: int, score: np.ndarray, members: np.ndarray, claimed: np.ndarray
    ) -> float:
        """Return the largest threshold on ``score`` that reaches the recall target."""
        n_members = int(members.sum())
        # Tolerance so that e.g. 0.95 * 20 gives 19 rather than 20 after rounding.
        needed = max(1, math.ceil(self.recall_target * n_members - 1e-9))
        reachable = np.sort(score[members & ~claimed])[::-1]
        if reachable.size >= needed:
            return float(reachable[needed - 1])
        warnings.warn(
            f"Tail class {k} cannot reach recall {self.recall_target} on validation: "
            f"larger classes already take {n_members - reachable.size} of its "
            f"{n_members} samples; catching all the others.",
            UserWarning,
            stacklevel=3,
        )
        return float(reachable[-1]) if reachable.size else 1.0

    def _precision_floor(
        self, score: np.ndarray, members: np.ndarray, claimed: np.ndarray
    ) -> float:
        """Return the lowest threshold whose precision stays >= ``min_precision``."""
        if self.min_precision <= 0:
            return 0.0
        free = ~claimed
        order = np.argsort(-score[free], kind="stable")
        ranked_scores = score[free][order]
        hits = np.cumsum(members[free][order])
        precision = hits / np.arange(1, hits.size + 1)
        # Only cut between distinct scores: equal scores are predicted together.
        last_of_tie = np.r_[ranked_scores[1:] != ranked_scores[:-1], True]
        ok = np.flatnonzero((precision >= self.min_precision) & last_of_tie)
        if ok.size == 0:
            return float(np.nextafter(ranked_scores[0], np.inf)) if hits.size else 1.0
        return float(ranked_scores[ok[-1]])

    def _check_fitted(self) -> None:
        """Raise :class:`NotFittedError` before ``fit`` or ``from_dict`` has run."""
        check_is_fitted(self, "thresholds_", FIT_ON_VALIDATION)

    def predict(self, proba: Any) -> np.ndarray:
        """Return each row's class: a tail class past its threshold, or argmax."""
        self._check_fitted()
        arr = _check_proba(proba, self.n_classes_)
        n_low = self.n_classes_ - len(self.thresholds_)
        if arr.shape[0] == 1 and n_low > 0:
            # One task: the same sums and comparisons on plain floats (row_math).
            return np.array([self._predict_row(arr[0].tolist(), n_low)])
        cum = _from_top(arr)
        pred = np.argmax(arr[:, :n_low], axis=1)
        # Lowest tail class first so that larger classes overwrite it when they pass.
        for k in sorted(self.thresholds_):
            pred = np.where(cum[:, k] >= self.thresholds_[k], k, pred)
        return pred.astype(int)

    def _predict_row(self, values: list[float], n_low: int) -> int:
        """Return :meth:`predict` of one checked row with numpy's bits: the
        cumulative sums from the top one after another, as ``np.cumsum`` adds."""
        cum = values.copy()
        for k in range(len(values) - 2, -1, -1):
            cum[k] = cum[k + 1] + values[k]
        pred = row_math.argmax(values[:n_low])
        for k in sorted(self.thresholds_):
            if cum[k] >= self.thresholds_[k]:
                pred = k
        return pred

    def explain(
        self,
        probabilities: Any,
        chosen: int,
        labels: list[str] | None = None,
        by_rule: int | None = None,
    ) -> str:
        """Return why one task's target got class ``chosen``, in one sentence.

        Names the tail rule when it moved the answer away from the most likely
        class (with the cumulative probability, its threshold and the recall target
        it was tuned for), and the expert combination when the served class is not
        the model's. ``labels`` are the class names (default: the indices).

        :param probabilities: the task's (K,) class probabilities.
        :param chosen: the class served.
        :param by_rule: this rule's class for ``probabilities`` when the caller
            has it already (:meth:`predict`); None: computed here.
        """
        self._check_fitted()
        # One row: plain floats (numpy costs more per call than the work), checked
        # as _check_proba checks, which words the error where one is found.
        row = np.asarray(probabilities, dtype=float)
        values = row.tolist() if row.ndim == 1 else []
        if len(values) < 2 or not all(0.0 <= v < math.inf for v in values):
            _check_proba(row[None, :], None)
        names = labels or [str(k) for k in range(len(values))]

        def cls(k: int) -> str:
            label = f" ({names[k]})" if names[k] != str(k) else ""
            return f"class {k}{label}, p={number(values[k], None)}"

        top = values.index(max(values))  # the first largest, as np.argmax
        if by_rule is None:
            by_rule = (
                int(self.predict(row[None, :])[0])
                if len(values) == self.n_classes_
                else top
            )
        if chosen != by_rule:
            return (
                f"{cls(chosen)} instead of the model's {cls(by_rule)}: the experts' "
                "recent record for similar tasks"
            )
        if chosen == top:
            return f"most likely {cls(chosen)}"
        cum = _from_top(row[None, :])[0]
        recall = f"recall target {number(self.recall_target, None)}"
        if chosen in self.thresholds_:
            test = compared(
                f"P(class >= {chosen})", cum[chosen], ">=", self.thresholds_[chosen]
            )
        elif top in self.thresholds_:
            test = compared(f"P(class >= {top})", cum[top], "<", self.thresholds_[top])
        else:
            test = "tail classes below their thresholds"
        return f"{cls(chosen)} over most likely {cls(top)}: tail rule, {test}, {recall}"

    def predict_with_confidence(self, proba: Any) -> tuple[np.ndarray, np.ndarray]:
        """Return the chosen classes and the confidence that each is enough."""
        pred = self.predict(proba)
        return pred, confidence(proba, pred)

    def _make_report(
        self, proba: np.ndarray, y: np.ndarray
    ) -> dict[int, dict[str, Any]]:
        """Compare argmax and the rule on validation for each tail class."""
        by_argmax = np.argmax(proba, axis=1)
        by_rule = self.predict(proba)
        report: dict[int, dict[str, Any]] = {}
        for k, threshold in sorted(self.thresholds_.items(), reverse=True):
            rec_a, prec_a = _recall_precision(y, by_argmax, k)
            rec_r, prec_r = _recall_precision(y, by_rule, k)
            report[k] = {
                "threshold": threshold,
                "support": int(np.sum(y == k)),
                "recall_argmax": rec_a,
                "precision_argmax": prec_a,
                "recall_rule": rec_r,
                "precision_rule": prec_r,
                "precision_paid": prec_a - prec_r,
                "fallback": k in self.fallback_classes_,
                "limited_by_precision": k in getattr(self, "limited_classes_", []),
            }
        return report

    def to_dict(self) -> dict[str, Any]:
        """Return the parameters and learned state as JSON-ready plain values."""
        self._check_fitted()
        return {
            "recall_target": float(self.recall_target),
            "n_tail_classes": int(self.n_tail_classes),
            "fallback_threshold": float(self.fallback_threshold),
            "min_precision": float(self.min_precision),
            "n_classes_": int(self.n_classes_),
            "thresholds_": {str(k): float(t) for k, t in self.thresholds_.items()},
            "fallback_classes_": [int(k) for k in self.fallback_classes_],
            "report_": {str(k): dict(v) for k, v in self.report_.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TailDecisionRule:
        """Rebuild a fitted rule from :meth:`to_dict` output."""
        missing = {
            "recall_target",
            "n_tail_classes",
            "n_classes_",
            "thresholds_",
        } - set(data)
        if missing:
            raise ValueError(
                "The stored decision rule must have the keys recall_target, "
                "n_tail_classes, n_classes_ and thresholds_. "
                f"Got a dict missing {sorted(missing)} instead."
            )
        rule = cls(
            recall_target=float(data["recall_target"]),
            n_tail_classes=int(data["n_tail_classes"]),
            fallback_threshold=float(
                data.get("fallback_threshold", DEFAULT_FALLBACK_THRESHOLD)
            ),
            min_precision=float(data.get("min_precision", 0.0)),
        )
        rule.n_classes_ = int(data["n_classes_"])
        rule.thresholds_ = {int(k): float(t) for k, t in data["thresholds_"].items()}
        rule.fallback_classes_ = [int(k) for k in data.get("fallback_classes_", [])]
        rule.report_ = {int(k): dict(v) for k, v in data.get("report_", {}).items()}
        return rule


@dataclass(frozen=True)
class CoverageCurve:
    """Share of tasks decided without scouts, and their accuracy, per threshold."""

    thresholds: np.ndarray
    coverage: np.ndarray
    accuracy: np.ndarray  # NaN where no task is decided
    n_decided: np.ndarray
    n_total: int

    def to_dict(self) -> dict[str, Any]:
        """Return the curve as lists (None for an undefined accuracy), JSON-ready."""
        return {
            "thresholds": [float(t) for t in self.thresholds],
            "coverage": [float(c) for c in self.coverage],
            "accuracy": [None if np.isnan(a) else float(a) for a in self.accuracy],
            "n_decided": [int(d) for d in self.n_decided],
            "n_total": int(self.n_total),
        }


def coverage_accuracy_curve(
    confidences_min_over_targets: Any,
    all_correct: Any,
    thresholds: Any = None,
) -> CoverageCurve:
    """Return coverage vs accuracy: tasks whose weakest target is >= each threshold.

    A task counts as decided when its lowest confidence over the targets reaches
    the threshold (the confidence-threshold policy the cost choice replaced; a
    report of how the model's confidence ranks tasks, not what is served);
    accuracy is the share of those decided tasks whose targets are all right.

    :param confidences_min_over_targets: (n,) lowest confidence of each task.
    :param all_correct: (n,) whether every target of the task was predicted right.
    :param thresholds: thresholds to sweep; default 0.0, 0.05, ..., 1.0.
    """
    conf = np.asarray(confidences_min_over_targets, dtype=float).ravel()
    correct = np.asarray(all_correct, dtype=bool).ravel()
    if conf.size == 0 or conf.size != correct.size:
        raise ValueError(
            "The 'confidences_min_over_targets' and 'all_correct' fields must be "
            f"non-empty and of equal length. Got {conf.size} and {correct.size} "
            "instead."
        )
    ts = (
        np.linspace(0.0, 1.0, 21)
        if thresholds is None
        else np.asarray(thresholds, float)
    )
    decided = conf[None, :] >= ts[:, None]
    n_decided = decided.sum(axis=1)
    hits = (decided & correct[None, :]).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(n_decided > 0, hits / np.maximum(n_decided, 1), np.nan)
    return CoverageCurve(ts, n_decided / conf.size, accuracy, n_decided, conf.size)
