"""Readable tables of predictions for the terminal."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import pandas as pd

from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.core.domain.units import prediction_to_panda

SHORT = {"ramcount": "RAM", "cputime": "CPU", "iointensity": "IO", "walltime": "WALL"}
#: ``target prediction -> (integer, unit)``: PanDA's stored form on a writer's path.
Convert = Callable[[TargetPrediction], tuple[int, str]]


def written(target: TargetPrediction, convert: Convert = prediction_to_panda) -> str:
    """Return the value as PanDA stores it (``2300 mHS06sPerEvent``), not the float.

    The cost choice works in floats (``19361.999999999996``); what reaches JEDI is
    the one rounding of :func:`~panda_predictor.core.domain.units.prediction_to_panda`
    (shown without the ``...Fixed`` suffix the ``fixed_units`` setting adds), or
    ``convert``'s (the hook's
    :func:`~panda_predictor.core.domain.units.database_value`).
    """
    try:
        number, unit = convert(target)
    except ValueError:  # not finite: show what there is
        return f"{target.value} {target.unit}"
    return f"{number} {unit}"


def predictions_frame(
    predictions: Iterable[TaskPrediction],
    tasks: Mapping[int, Mapping[str, object]] | None = None,
    convert: Convert = prediction_to_panda,
) -> pd.DataFrame:
    """Return one row per task: id, (task info), stored value per target, decision."""
    rows = []
    for p in predictions:
        row: dict[str, object] = {"jediTaskID": p.jeditaskid}
        if tasks and p.jeditaskid in tasks:
            row.update(tasks[p.jeditaskid])
        for name, t in p.targets.items():
            row[SHORT.get(name, name)] = f"{written(t, convert)} ({t.confidence:.2f})"
        row["decision"] = p.decision
        row["reason"] = p.reason
        rows.append(row)
    return pd.DataFrame(rows)


def predictions_table(
    predictions: Iterable[TaskPrediction],
    tasks: Mapping[int, Mapping[str, object]] | None = None,
    max_rows: int = 40,
    convert: Convert = prediction_to_panda,
) -> str:
    """Return the predictions as an aligned text table (at most ``max_rows``)."""
    frame = predictions_frame(predictions, tasks, convert)
    if frame.empty:
        return "(no tasks)"
    more = len(frame) - max_rows
    text = frame.head(max_rows).to_string(index=False, max_colwidth=48)
    return text + (f"\n... and {more} more" if more > 0 else "")
