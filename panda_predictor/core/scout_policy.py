"""The applied / kept_scouts policy: skip the scouts only when every target is sure.

:class:`DecisionPolicy` keeps the scouts when any target's confidence (see
:func:`panda_predictor.core.tail_rule.confidence`) is below the threshold, or when
the task lies outside what the models were trained on (both its transformation and
its framework unseen). Two outputs of the same rule:

* :meth:`DecisionPolicy.decide_many`: one :class:`TaskDecision` per task, with a
  sentence saying why (what the audit table, the hook and the HTTP service show);
* :meth:`DecisionPolicy.decide_table`: whole columns (decision, reason kind, the
  least confident target and its confidence), for bulk callers that score
  hundreds of thousands of tasks and would spend most of their time building
  sentences and objects.

Pure numpy, like the rest of the core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from panda_predictor.core.reason_text import compared

APPLIED = "applied"
KEPT_SCOUTS = "kept_scouts"

#: ``reason_kind`` values of :meth:`DecisionPolicy.decide_table`.
OUTSIDE_DOMAIN = "outside_domain"
LOW_CONFIDENCE = "low_confidence"
CONFIDENT = "confident"


#: Stands for "no transformation" in a bundle's known transformations: a log
#: whose tasks name none (a job log without executables) is still familiar.
NO_TRANSFORMATION = "__none__"


def in_training_domain(
    transformation: str | None,
    framework: str | None,
    known_transformations: Sequence[str] | set[str],
    known_frameworks: Sequence[str] | set[str],
) -> bool:
    """Return False only when both the transformation and the framework are unseen.

    A task without a transformation counts as known when training had such tasks
    too (:data:`NO_TRANSFORMATION` is among the known transformations).
    """
    if transformation is None:
        transformation = NO_TRANSFORMATION
    return transformation in set(known_transformations) or framework in set(
        known_frameworks
    )


@dataclass(frozen=True)
class TaskDecision:
    """The policy's verdict for one task: ``applied`` or ``kept_scouts``, and why."""

    decision: str
    reason: str
    classes: dict[str, int] = field(default_factory=dict)
    confidences: dict[str, float] = field(default_factory=dict)

    @property
    def applied(self) -> bool:
        """Whether the prediction replaces the scouts."""
        return self.decision == APPLIED


@dataclass(frozen=True)
class _Batch:
    """Checked inputs of a batch decision."""

    names: list[str]
    conf: dict[str, np.ndarray]
    cls: dict[str, np.ndarray]
    in_domain: np.ndarray
    threshold: float


class DecisionPolicy:
    """Apply a prediction only when every target is confident and the task is familiar.

    :param confidence_threshold: a target whose confidence is below it keeps the scouts.
    """

    def __init__(self, confidence_threshold: float = 0.6) -> None:
        self.confidence_threshold = confidence_threshold

    def _check(self) -> float:
        t = self.confidence_threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 <= t <= 1.0:
            raise ValueError(
                "The 'confidence_threshold' field must be a number in [0, 1]. "
                f"Got {t!r} instead."
            )
        return float(t)

    def decide(
        self,
        classes: Mapping[str, int],
        confidences: Mapping[str, float],
        in_domain: bool = True,
    ) -> TaskDecision:
        """Decide for one task from its per-target classes and confidences."""
        batch = self.decide_many(
            {k: [v] for k, v in classes.items()},
            {k: [v] for k, v in confidences.items()},
            [in_domain],
        )
        return batch[0]

    def _batch(
        self,
        classes: Mapping[str, Any],
        confidences: Mapping[str, Any],
        in_domain: Any,
    ) -> _Batch:
        """Validate a batch: same targets, one class and confidence per task."""
        threshold = self._check()
        if set(classes) != set(confidences) or not confidences:
            raise ValueError(
                "The 'classes' and 'confidences' fields must name the same, non-empty "
                f"set of targets. Got {sorted(classes)} and {sorted(confidences)} "
                "instead."
            )
        names = list(confidences)
        conf = {t: np.asarray(confidences[t], dtype=float).ravel() for t in names}
        cls = {t: np.asarray(classes[t]).ravel().astype(int) for t in names}
        n = conf[names[0]].size
        if any(a.size != n for a in (*conf.values(), *cls.values())):
            raise ValueError(
                "Every target must have one class and one confidence per task. "
                f"Got lengths {[a.size for a in conf.values()]} instead."
            )
        dom = np.ones(n, bool) if in_domain is None else np.asarray(in_domain, bool)
        if dom.shape != (n,):
            raise ValueError(
                f"The 'in_domain' field must have one flag per task ({n}). "
                f"Got shape {dom.shape} instead."
            )
        return _Batch(names, conf, cls, dom, threshold)

    def decide_many(
        self,
        classes: Mapping[str, Any],
        confidences: Mapping[str, Any],
        in_domain: Any = None,
    ) -> list[TaskDecision]:
        """Decide for many tasks at once; each mapping holds one array per target.

        :param classes: target name -> (n,) chosen classes.
        :param confidences: target name -> (n,) confidences, see :func:`confidence`.
        :param in_domain: (n,) booleans; None means every task is in domain.
        """
        b = self._batch(classes, confidences, in_domain)
        names, threshold = b.names, b.threshold
        out: list[TaskDecision] = []
        for i in range(b.in_domain.size):
            task_conf = {t: float(b.conf[t][i]) for t in names}
            task_cls = {t: int(b.cls[t][i]) for t in names}
            low = [t for t in names if not task_conf[t] >= threshold]
            if not b.in_domain[i]:
                decision = KEPT_SCOUTS
                reason = "outside training domain: unknown transformation and framework"
            elif low:
                decision = KEPT_SCOUTS
                reason = "low confidence: " + "; ".join(
                    compared(t, task_conf[t], "<", threshold) for t in low
                )
            else:
                decision = APPLIED
                weakest = min(names, key=task_conf.__getitem__)
                reason = "confident: lowest " + compared(
                    weakest, task_conf[weakest], ">=", threshold
                )
            out.append(TaskDecision(decision, reason, task_cls, task_conf))
        return out

    def decide_table(
        self,
        classes: Mapping[str, Any],
        confidences: Mapping[str, Any],
        in_domain: Any = None,
    ) -> dict[str, np.ndarray]:
        """Decide for many tasks at once and return columns instead of objects.

        The same rule as :meth:`decide_many` (same inputs). Returns ``decision``
        (APPLIED or KEPT_SCOUTS), ``reason_kind`` (OUTSIDE_DOMAIN, LOW_CONFIDENCE
        or CONFIDENT), ``weakest_target`` (the least confident target; the first
        in target order on a tie) and ``weakest_confidence``. A NaN confidence
        counts as below the threshold, as in :meth:`decide_many`.
        """
        b = self._batch(classes, confidences, in_domain)
        matrix = np.column_stack([b.conf[t] for t in b.names])
        low = ~(matrix >= b.threshold)
        weakest = np.argmin(np.where(np.isnan(matrix), -np.inf, matrix), axis=1)
        kind = np.where(
            ~b.in_domain,
            OUTSIDE_DOMAIN,
            np.where(low.any(axis=1), LOW_CONFIDENCE, CONFIDENT),
        ).astype(object)
        return {
            "decision": np.where(kind == CONFIDENT, APPLIED, KEPT_SCOUTS).astype(
                object
            ),
            "reason_kind": kind,
            "weakest_target": np.asarray(b.names, dtype=object)[weakest],
            "weakest_confidence": matrix[np.arange(matrix.shape[0]), weakest],
        }

    def to_dict(self) -> dict[str, Any]:
        """Return the policy's parameters as plain values."""
        return {"confidence_threshold": self._check()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DecisionPolicy:
        """Rebuild a policy from :meth:`to_dict` output."""
        policy = cls(confidence_threshold=float(data["confidence_threshold"]))
        policy._check()
        return policy
