"""Request and response models of the HTTP API (pydantic v2).

Request bodies are task definitions, validated by
:class:`panda_predictor.taskdef.TaskDefinition` (our names or PanDA's parameter-map
names; unknown keys refused). The response models below fix the shape of what the
service returns, so a change to it is a visible, reviewed change.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from panda_predictor.taskdef import (
    TaskDefinition,
    TaskDefinitionError,
    parse_task_definitions,
)


def parse_prediction_request(body: Any) -> list[TaskDefinition]:
    """Return the task definitions of a ``POST /v1/predictions`` body.

    The body is one task definition (an object), a list of them, or an object
    ``{"tasks": [...]}``. Raises :class:`TaskDefinitionError` naming the field.
    """
    if isinstance(body, dict) and set(body) == {"tasks"}:
        body = body["tasks"]
        if not isinstance(body, list):
            raise TaskDefinitionError(
                "The 'tasks' field must be a list of task definitions. "
                f"Got {type(body).__name__} instead.",
                "tasks",
            )
    return parse_task_definitions(body)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FeatureOut(_Out):
    """One feature that drove a target's prediction."""

    feature: str
    value: str | float | int | None
    contribution: float


class TargetOut(_Out):
    """The prediction of one target."""

    class_index: int
    class_label: str
    lower: float | None
    upper: float | None
    unit: str
    value: float  # the class value in ``unit``, rounded only when written to PanDA
    confidence: float
    probabilities: list[float]
    choice: str  # why this class: most likely, or the tail rule's pick over it
    top_features: list[FeatureOut]
    explanation: str


class ModelOut(_Out):
    """Which registered model answered."""

    name: str
    version: str


class PredictionOut(_Out):
    """The prediction and decision for one task."""

    jediTaskID: int
    decision: Literal["applied", "kept_scouts", "shadow", "held_back"]
    reason: str
    scouts: Literal["skipped", "kept"]
    model: ModelOut
    predicted_at: str | None
    # Applied with the scouts' first values: have PanDA re-measure the task once
    # its first 3 jobs are settled (docs/operations.md, "Early re-measurement").
    early_remeasure: bool
    targets: dict[str, TargetOut]


class PredictionsOut(_Out):
    """The body of a ``POST /v1/predictions`` answer."""

    predictions: list[PredictionOut]
    history_features: bool


class HookOut(_Out):
    """The body of a ``POST /v1/tasks/<id>/prediction`` answer."""

    jediTaskID: int
    written: bool  # the values went into JEDI_TASKS (decision applied)
    outcome: Literal[
        "applied", "kept_scouts", "moved_by_jedi", "shadow", "held_back", "not_written"
    ]
    prediction: PredictionOut | None
