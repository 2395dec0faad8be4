"""Readable tables of predictions for the terminal."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from panda_predictor.core.task_prediction import TaskPrediction

SHORT = {"ramcount": "RAM", "cputime": "CPU", "iointensity": "IO", "walltime": "WALL"}


def predictions_frame(
    predictions: Iterable[TaskPrediction],
    tasks: Mapping[int, Mapping[str, object]] | None = None,
) -> pd.DataFrame:
    """Return one row per task: id, (task info), value+unit per target, decision."""
    rows = []
    for p in predictions:
        row: dict[str, object] = {"jediTaskID": p.jeditaskid}
        if tasks and p.jeditaskid in tasks:
            row.update(tasks[p.jeditaskid])
        for name, t in p.targets.items():
            row[SHORT.get(name, name)] = f"{t.value} {t.unit} ({t.confidence:.2f})"
        row["decision"] = p.decision
        row["reason"] = p.reason
        rows.append(row)
    return pd.DataFrame(rows)


def predictions_table(
    predictions: Iterable[TaskPrediction],
    tasks: Mapping[int, Mapping[str, object]] | None = None,
    max_rows: int = 40,
) -> str:
    """Return the predictions as an aligned text table (at most ``max_rows``)."""
    frame = predictions_frame(predictions, tasks)
    if frame.empty:
        return "(no tasks)"
    more = len(frame) - max_rows
    text = frame.head(max_rows).to_string(index=False, max_colwidth=48)
    return text + (f"\n... and {more} more" if more > 0 else "")
