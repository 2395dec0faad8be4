"""The one decision: tasks and their history in, written values and decisions out.

Every consumer calls this module: the database hook, the HTTP service, the JEDI
refiner's local client, ``panda-predictor htcondor`` and the benchmark. The rules,
in order:

1. **task checks**: a row whose numbers no real task has (``corecount`` <= 0,
   negative counts; :mod:`panda_predictor.core.domain.task_checks`) is not predicted and
   keeps its scouts, with the reason naming the field, what was expected and what
   came;
2. **the prediction and the cost decision**: :class:`Predictor` (features,
   models, tail rule, expert combination, calibrated distribution, the value of
   lowest expected cost per target, applied / kept_scouts;
   :meth:`Predictor.decide`);
3. **PanDA's exhausted checks**: an ``applied`` prediction far from the task's
   preset values keeps the scouts
   (:func:`panda_predictor.core.domain.requested_values.far_from_request`);
4. **the rollout stage**, where the caller deploys (``mode`` shadow, the rollout
   share; :mod:`panda_predictor.core.decide.rollout`).

:func:`decide` returns one :class:`TaskPrediction` per task (the hook, HTTP, the
refiner, HTCondor); :func:`decide_table` is the same rules as columns for bulk
callers (the benchmark, replays, drift), and the parity tests hold the two equal.
The history is one type (:class:`~panda_predictor.serving.combination.ServingHistory`,
or a labelled history frame, which is wrapped in one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.decide.rollout import route_all
from panda_predictor.core.decide.scout_policy import KEPT_SCOUTS
from panda_predictor.core.domain.requested_values import (
    COLUMN_KEYS,
    far_from_request,
    requested_values,
)
from panda_predictor.core.domain.task_checks import CHECKED_FIELDS, input_problem
from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.core.features.task_features import REQUEST_COLUMNS, TASK_COLUMNS
from panda_predictor.serving.classified import Classified
from panda_predictor.serving.predictor import History, Predictor
from panda_predictor.settings import Settings

#: ``reason_kind`` of a row the task checks refused, and of one kept for being far
#: from its preset values (besides the policy's kinds).
INVALID_TASK = "invalid_task"
FAR_FROM_PRESET = "far_from_request"
#: The preset columns the far-from-request rule reads (JEDI_TASKS names).
PRESET_COLUMNS: tuple[str, ...] = tuple(
    dict.fromkeys(
        c
        for value, units in COLUMN_KEYS.values()
        for c in (value, *((units,) if isinstance(units, str) else units))
    )
)


def _problems(tasks: pd.DataFrame) -> list[str | None]:
    present = [c for c in CHECKED_FIELDS if c in tasks.columns]
    return [input_problem(row) for row in tasks[present].to_dict("records")]


def _presets(tasks: pd.DataFrame) -> list[dict[str, Any]] | None:
    """Return each row's preset values, or None when the rows carry none."""
    if not any(c in tasks.columns for c in PRESET_COLUMNS):
        return None
    return tasks.reindex(columns=list(PRESET_COLUMNS)).to_dict("records")


def _unless_far(
    prediction: TaskPrediction, preset: Mapping[str, Any] | None
) -> TaskPrediction:
    """Return ``prediction``, or its scouts kept where PanDA would exhaust it.

    An applied value far from the task's preset would make PanDA set the task
    exhausted (:func:`far_from_request`): such a task keeps its scouts.
    """
    if preset is None or prediction.decision != "applied":
        return prediction
    far = far_from_request(prediction, requested_values(preset, COLUMN_KEYS))
    if far is None:
        return prediction
    return dataclasses.replace(prediction, decision="kept_scouts", reason=far)


def served_rollout(settings: Settings) -> tuple[str, float] | None:
    """Return the ``rollout`` the HTTP service decides with: ``(mode,
    rollout_share)``, or None in mode ``legacy`` (the kill switch stops the hooks;
    the service still answers with the model's own decisions)."""
    if settings.mode == "legacy":
        return None
    return settings.mode, settings.rollout_share


def decide(
    predictor: Predictor,
    tasks: pd.DataFrame,
    history: History = None,
    *,
    now: datetime | None = None,
    rollout: tuple[str, float] | None = None,
) -> list[TaskPrediction]:
    """Return one prediction per row of ``tasks``, in order, under every rule.

    :param predictor: the champion's :class:`Predictor`.
    :param tasks: task rows (JEDI_TASKS columns with their dataset counts, or a
        task definition read by :mod:`panda_predictor.taskdef`).
    :param history: the labelled history (frame or ServingHistory); None: none.
    :param now: time stamped on the predictions.
    :param rollout: ``(mode, rollout_share)`` to route the decisions through
        shadow mode and the rollout share; None: the decisions as made.
    """
    if tasks.empty:
        return []
    stamp = now or datetime.now(UTC).replace(tzinfo=None)
    problems = _problems(tasks)
    valid = np.array([p is None for p in problems], dtype=bool)
    predicted = iter(
        predictor.predict(tasks[valid].reset_index(drop=True), history)
        if valid.any()
        else []
    )
    found = _presets(tasks)
    presets: list[Mapping[str, Any] | None] = (
        list(found) if found is not None else [None] * len(tasks)
    )
    return _decided(
        predictor,
        tasks["jeditaskid"].tolist(),
        problems,
        predicted,
        presets,
        stamp,
        rollout,
    )


def _decided(
    predictor: Predictor,
    task_ids: Sequence[Any],
    problems: Sequence[str | None],
    predicted: Iterator[TaskPrediction],
    presets: Sequence[Mapping[str, Any] | None],
    stamp: datetime,
    rollout: tuple[str, float] | None,
) -> list[TaskPrediction]:
    """Return the decisions of tasks under rules 1, 3 and 4 (module doc).

    Both forms end here, :func:`decide` for a frame and :func:`_decide_one` for one
    record: a refused task keeps its scouts, a prediction far from its task's
    preset values keeps them too, and the rollout routes what is left.

    :param problems: per task, why the task checks refused it (None: valid).
    :param predicted: the predictions of the valid tasks, in order.
    :param presets: per task, its preset values (None: it carries none).
    """
    out = []
    for task_id, problem, preset in zip(task_ids, problems, presets, strict=True):
        if problem is not None:
            out.append(_refused(predictor, int(task_id), problem, stamp))
        else:
            out.append(_unless_far(next(predicted), preset))
    return route_all(out, *rollout) if rollout is not None else out


def decide_records(
    predictor: Predictor,
    records: Sequence[Mapping[str, Any]],
    history: History = None,
    *,
    now: datetime | None = None,
    rollout: tuple[str, float] | None = None,
) -> list[TaskPrediction]:
    """Return :func:`decide` for task records (TASK_COLUMNS maps, as the HTTP
    service reads them); a few records take the predictor's low-latency route
    (:data:`~panda_predictor.serving.predictor.FAST_PATH_MAX_ROWS`).

    One record with every task column, on a history the records route serves,
    skips the frame altogether (:func:`_decide_one`): building a one-row frame
    and reading it back as records cost more than the models themselves.
    """
    if not records:
        return []
    one = records[0]
    if (
        len(records) == 1
        and all(c in one for c in TASK_COLUMNS)
        and predictor.serves_records(history)
    ):
        return _decide_one(predictor, one, history, now=now, rollout=rollout)
    return decide(
        predictor, pd.DataFrame(list(records)), history, now=now, rollout=rollout
    )


def _decide_one(
    predictor: Predictor,
    record: Mapping[str, Any],
    history: History,
    *,
    now: datetime | None,
    rollout: tuple[str, float] | None,
) -> list[TaskPrediction]:
    """Return :func:`decide` of one record, the same rules without a frame."""
    stamp = now or datetime.now(UTC).replace(tzinfo=None)
    problem = input_problem({c: record[c] for c in CHECKED_FIELDS if c in record})
    predicted: list[TaskPrediction] = []
    if problem is None:
        columns = [*TASK_COLUMNS, *(c for c in REQUEST_COLUMNS if c in record)]
        predicted = predictor.predict_records(
            [{c: record[c] for c in columns}], predictor.history(history), now
        )
    preset = (
        {c: record.get(c, np.nan) for c in PRESET_COLUMNS}
        if any(c in record for c in PRESET_COLUMNS)
        else None
    )
    return _decided(
        predictor,
        [record["jeditaskid"]],
        [problem],
        iter(predicted),
        [preset],
        stamp,
        rollout,
    )


def decide_table(
    predictor: Predictor,
    tasks: pd.DataFrame,
    history: History = None,
    parts: Classified | None = None,
) -> pd.DataFrame:
    """Return :func:`decide`'s decisions as columns (see :meth:`Predictor.table_of`).

    Rows refused by the task checks keep their scouts (``reason_kind``
    :data:`INVALID_TASK`), and so do applied rows far from their preset values
    (:data:`FAR_FROM_PRESET`). ``parts`` are the tasks' classified parts when the
    caller computed them already (the benchmark scores them too).
    """
    if tasks.empty:
        return pd.DataFrame(columns=predictor.table_columns())
    if parts is None:
        parts = predictor.classified(tasks, history)
    table = predictor.table_of(tasks, parts)
    problems = _problems(tasks)
    invalid = np.array([p is not None for p in problems], dtype=bool)
    if invalid.any():
        table.loc[invalid, "decision"] = KEPT_SCOUTS
        table.loc[invalid, "reason_kind"] = INVALID_TASK
    presets = _presets(tasks)
    if presets is not None:
        applied = np.flatnonzero((table["decision"] == "applied").to_numpy())
        if applied.size:
            # Only applied rows with a preset can be far: build their records.
            sub = tasks.iloc[applied]
            for row, prediction in zip(
                applied,
                predictor.predict(sub.reset_index(drop=True), history),
                strict=True,
            ):
                if _unless_far(prediction, presets[row]) is not prediction:
                    table.iloc[row, table.columns.get_loc("decision")] = KEPT_SCOUTS
                    table.iloc[row, table.columns.get_loc("reason_kind")] = (
                        FAR_FROM_PRESET
                    )
    return table


def _refused(
    predictor: Predictor, task_id: int, problem: str, stamp: datetime
) -> TaskPrediction:
    return TaskPrediction(
        task_id,
        str(getattr(predictor, "model_name", "?")),
        str(getattr(predictor, "model_version", "?")),
        "kept_scouts",
        f"invalid task: {problem}",
        {},
        stamp,
    )
