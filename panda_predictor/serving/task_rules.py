"""Predict database task rows under PanDA's rules for input and requester values.

The hook reads JEDI_TASKS rows, not validated task definitions, and those rows carry
the requester's preset values. Before and after the one :class:`Predictor`, this
applies the same core rules the JEDI refiner applies to its parameter map:

- a row whose numbers no real task has (``corecount`` <= 0, negative counts; see
  :mod:`panda_predictor.core.task_checks`) is not predicted: it keeps its scouts,
  with the reason naming the field, what was expected and what came;
- an ``applied`` prediction far from the task's preset values keeps the scouts
  (:func:`panda_predictor.core.requested_values.far_from_request`).

The writer then keeps the preset values PanDA's scouts would keep
(:func:`~panda_predictor.core.requested_values.plan_write`).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.requested_values import (
    COLUMN_KEYS,
    far_from_request,
    requested_values,
)
from panda_predictor.core.task_checks import CHECKED_FIELDS, input_problem
from panda_predictor.core.task_prediction import TaskPrediction


def predict_checked(
    predictor: Any,
    tasks: pd.DataFrame,
    history: Any = None,
    now: datetime | None = None,
) -> list[TaskPrediction]:
    """Return one prediction per row of ``tasks``, in order, under PanDA's rules.

    Parameters
    ----------
    predictor:
        The :class:`~panda_predictor.serving.predictor.Predictor` to use.
    tasks:
        JEDI_TASKS rows with their dataset counts (``read_task_features``).
    history:
        Passed to ``predictor.predict``.
    now:
        Time stamped on the refused rows' records.
    """
    if tasks.empty:
        return []
    stamp = now or datetime.now(UTC).replace(tzinfo=None)
    present = [c for c in CHECKED_FIELDS if c in tasks.columns]
    problems = [input_problem(row) for row in tasks[present].to_dict("records")]
    valid = np.array([p is None for p in problems], dtype=bool)
    predicted = iter(
        predictor.predict(tasks[valid].reset_index(drop=True), history)
        if valid.any()
        else []
    )
    columns = [c for keys in COLUMN_KEYS.values() for c in _names(keys)]
    presets = tasks.reindex(columns=columns).to_dict("records")
    out = []
    for task_id, problem, preset in zip(
        tasks["jeditaskid"], problems, presets, strict=True
    ):
        if problem is not None:
            out.append(
                TaskPrediction(
                    int(task_id),
                    str(getattr(predictor, "model_name", "?")),
                    str(getattr(predictor, "model_version", "?")),
                    "kept_scouts",
                    f"invalid task: {problem}",
                    {},
                    stamp,
                )
            )
            continue
        prediction = next(predicted)
        if prediction.decision == "applied":
            far = far_from_request(prediction, requested_values(preset, COLUMN_KEYS))
            if far is not None:
                prediction = dataclasses.replace(
                    prediction, decision="kept_scouts", reason=far
                )
        out.append(prediction)
    return out


def _names(keys: tuple[str, str | tuple[str, ...]]) -> list[str]:
    value, units = keys
    return [value, *((units,) if isinstance(units, str) else units)]
