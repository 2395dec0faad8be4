"""The plugin's prediction of one task, shared by the models, hooks, service and writer.

Plain frozen dataclasses so every adapter (database writer, HTTP service, submit
hooks) exchanges the same typed object and PanDA's column names stay at the edges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

#: The outcomes of the decision rule for a task (``applied``, ``kept_scouts``) and
#: of the rollout stage (:mod:`panda_predictor.core.decide.rollout`): ``shadow``
#: (predicted and audited, nothing written) and ``held_back`` (outside the rollout
#: share).
DECISIONS: tuple[str, ...] = ("applied", "kept_scouts", "shadow", "held_back")

Decision = Literal["applied", "kept_scouts", "shadow", "held_back"]


@dataclass(frozen=True)
class TargetPrediction:
    """Predicted class of one resource target, with its bin, value and confidence.

    Parameters
    ----------
    target:
        Target name (``ramcount``, ``cputime``, ``iointensity``, ``walltime``).
    class_index:
        Index of the chosen class in the target's bins.
    class_label:
        Human-readable class name, e.g. ``"2000-3000"``.
    lower, upper:
        Bin edges of the class in ``unit`` (``None`` for an open end).
    value:
        The value written, in ``unit``: the lowest expected cost given the
        calibrated distribution (:mod:`panda_predictor.core.decide.cost_choice`), so it
        may lie above the class where the class is uncertain, or be the task's
        request. A float; it is rounded once, when converted to PanDA's stored
        form (:mod:`panda_predictor.core.domain.units`).
    unit:
        PanDA's unit of the target (``MBPerCore``, ``HS06sPerEvent``, ...).
    confidence:
        Probability that ``value`` is enough (calibrated), in [0, 1].
    probabilities:
        Probability of every class, in class order.
    choice:
        Why this class: the most likely one, or the tail rule's (or the experts')
        pick over it, with the numbers (``TailDecisionRule.explain``).
    """

    target: str
    class_index: int
    class_label: str
    lower: float | None
    upper: float | None
    value: float
    unit: str
    confidence: float
    probabilities: tuple[float, ...]
    choice: str = ""

    def __post_init__(self) -> None:
        if self.class_index < 0:
            raise ValueError(
                f"The 'class_index' field must be a non-negative integer. "
                f"Got {self.class_index!r} instead."
            )
        if not (0.0 <= self.confidence <= 1.0) or math.isnan(self.confidence):
            raise ValueError(
                f"The 'confidence' field must be a probability in [0, 1]. "
                f"Got {self.confidence!r} instead."
            )


@dataclass(frozen=True)
class TaskPrediction:
    """Everything predicted and decided for one JEDI task.

    Parameters
    ----------
    jeditaskid:
        The task's JEDITASKID.
    model_name, model_version:
        Registered model (or model set) that made the prediction.
    decision:
        ``applied`` (write the values, skip scouts) or ``kept_scouts``; after the
        rollout stage also ``shadow`` or ``held_back`` (nothing written).
    reason:
        Why, in a few words (shown in the audit table).
    targets:
        Prediction per target name.
    predicted_at:
        When the prediction was made (UTC); the writer uses the current time if unset.
    early_remeasure:
        Applied with the scouts' own first value on every target PanDA
        re-measures, or beside a target that writes its scouts' value for every
        task: once 3 of its jobs finished, the hook asks PanDA to re-measure it,
        as its scouts would have been (:mod:`panda_predictor.db.early_remeasure`).
    """

    jeditaskid: int
    model_name: str
    model_version: str
    decision: Decision
    reason: str
    targets: dict[str, TargetPrediction] = field(default_factory=dict)
    predicted_at: datetime | None = None
    early_remeasure: bool = False

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise ValueError(
                f"The 'decision' field must be one of {list(DECISIONS)}. "
                f"Got {self.decision!r} instead."
            )
        if isinstance(self.jeditaskid, bool) or not isinstance(self.jeditaskid, int):
            raise ValueError(
                f"The 'jeditaskid' field must be an integer. "
                f"Got {self.jeditaskid!r} instead."
            )
        for name, prediction in self.targets.items():
            if prediction.target != name:
                raise ValueError(
                    f"The 'targets' field must map each target name to its own "
                    f"prediction. Got {prediction.target!r} under {name!r} instead."
                )
