"""The raw features of a task itself: its definition, counts, requests and timing.

Everything here is known when the task is submitted: the JEDI_TASKS row (processing
type, transformation, release, core count, ...), the dataset counts once JEDI has
filled them (0/NaN before), the requester's own values where a task gives them, and
the hour and weekday it was created. Two routes compute the same numbers: a
vectorised one over a tasks frame (training, bulk) and one over a single task given
as a column -> value map (the low-latency serving route); both call
:func:`numeric_features`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.features.history import (
    REQUEST_PREFIX,
    is_null,
    split_transhome,
    text,
)

#: The tasks frame columns every caller must give (lower-case JEDI_TASKS names +
#: the input-dataset counts).
TASK_COLUMNS: tuple[str, ...] = (
    "jeditaskid",
    "creationdate",
    "processingtype",
    "tasktype",
    "prodsourcelabel",
    "transhome",
    "transuses",
    "transpath",
    "architecture",
    "corecount",
    "workinggroup",
    "campaign",
    "username",
    "n_input_datasets",
    "nfiles_sum",
    "nevents_sum",
)
#: The requester's own values, where a deployment knows them at submission (a job
#: log's requested time and memory; NaN when absent). PanDA's history rows cannot
#: give them: scouts overwrite RAMCOUNT and CPUTIME, so a stored value is a
#: measurement, not a request, and would leak the label.
REQUEST_COLUMNS: tuple[str, ...] = tuple(
    REQUEST_PREFIX + t for t in ("ramcount", "walltime", "cputime")
)
#: The columns of a task the hook reads: task fields and requests, never the
#: labels (whose names are those of PanDA's preset columns).
HOOK_COLUMNS: tuple[str, ...] = (*TASK_COLUMNS, *REQUEST_COLUMNS)
#: Categorical features, in output order.
CATEGORICAL_FEATURES: tuple[str, ...] = (
    "processingtype",
    "tasktype",
    "prodsourcelabel",
    "framework",
    "release",
    "transuses",
    "transpath",
    "architecture",
    "workinggroup",
    "campaign",
)
#: The numeric input columns, in the argument order of :func:`numeric_features`.
NUMERIC_INPUTS: tuple[str, ...] = (
    "corecount",
    "n_input_datasets",
    "nfiles_sum",
    "nevents_sum",
    *REQUEST_COLUMNS,
)
#: Numeric features of the task itself, in output order (history features follow).
TASK_NUMERIC_FEATURES: tuple[str, ...] = (
    "corecount",
    "multicore",
    "n_input_datasets",
    "log1p_nfiles",
    "log1p_nevents",
    "counts_known",
    "log1p_events_per_file",
    *REQUEST_COLUMNS,
    "creation_hour",
    "creation_weekday",
)


def numeric_features(
    inputs: np.ndarray, created: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """Return the task's numeric features (n x :data:`TASK_NUMERIC_FEATURES`).

    ``inputs`` is an (n, 7) float64 array of the :data:`NUMERIC_INPUTS` columns;
    ``created`` the creation hour and weekday (:func:`creation_fields`; None:
    unknown). Shared by the frame and the records route, so both compute the
    same values.
    """
    n = inputs.shape[0]
    # A count, a core count or a request of 0 or less is unknown; 0 datasets are
    # a count.
    known = inputs > 0
    known[:, 1] = inputs[:, 1] >= 0
    clean = np.where(known, inputs, np.nan)
    # Contiguous columns for log1p: numpy may compute strided input another way.
    nfiles = np.ascontiguousarray(clean[:, 2])
    nevents = np.ascontiguousarray(clean[:, 3])
    corecount = clean[:, 0]
    out = np.empty((n, len(TASK_NUMERIC_FEATURES)))
    out[:, 0] = corecount
    out[:, 1] = np.where(np.isnan(corecount), np.nan, corecount > 1)  # multicore
    out[:, 2] = clean[:, 1]  # n_input_datasets
    out[:, 3] = np.log1p(nfiles)
    out[:, 4] = np.log1p(nevents)
    out[:, 5] = ~(np.isnan(nfiles) & np.isnan(nevents))  # counts_known
    out[:, 6] = np.log1p(nevents / nfiles)  # log1p_events_per_file
    out[:, 7 : 7 + len(REQUEST_COLUMNS)] = clean[:, 4:]
    if created is None:
        out[:, -2:] = np.nan
    else:
        out[:, -2], out[:, -1] = created
    return out


def creation_times(values: Any) -> pd.Series:
    """Return creation dates as naive datetimes (NaT where unknown or unreadable)."""
    series = pd.Series(values)
    if not pd.api.types.is_datetime64_any_dtype(series):
        series = pd.to_datetime(series.astype(object), errors="coerce", utc=True)
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        series = series.dt.tz_convert("UTC").dt.tz_localize(None)
    return series


def creation_fields(created: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Return the hour and weekday (Monday 0) of naive creation times, NaN if NaT."""
    return (
        created.dt.hour.to_numpy(dtype=np.float64, na_value=np.nan),
        created.dt.day_of_week.to_numpy(dtype=np.float64, na_value=np.nan),
    )


def record_creation_fields(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Return :func:`creation_fields` of :func:`creation_times` of ``values``.

    Datetime objects (the HTTP service's and the benchmark's records) and None
    are read directly: a one-task pandas round trip costs more than the models.
    Anything else (text, numpy datetimes, NaT) takes the pandas route.
    """
    hours, weekdays = [], []
    for value in values:
        if value is None:
            hours.append(np.nan)
            weekdays.append(np.nan)
            continue
        if not isinstance(value, datetime) or value is pd.NaT:
            return creation_fields(creation_times(list(values)))
        if value.tzinfo is not None:
            try:
                value = value.astimezone(UTC)
            except (OverflowError, ValueError):
                return creation_fields(creation_times(list(values)))
        hours.append(float(value.hour))
        weekdays.append(float(value.weekday()))
    return np.array(hours, dtype=np.float64), np.array(weekdays, dtype=np.float64)


def task_features(tasks: pd.DataFrame) -> pd.DataFrame:
    """Compute the raw task features: categoricals as text (NaN = NULL), numbers.

    Zero or NULL core counts and dataset counts mean "unknown" (NaN): at refine time
    JEDI has not counted files and events yet. A missing request column is NaN.
    """
    framework, release = split_transhome(tasks["transhome"])
    own = [c for c in CATEGORICAL_FEATURES if c not in ("framework", "release")]
    out = {c: text(tasks[c]) for c in own}
    out["framework"], out["release"] = framework, release
    raw = pd.DataFrame(out, index=tasks.index)[list(CATEGORICAL_FEATURES)]
    inputs = np.empty((len(tasks), len(NUMERIC_INPUTS)))
    for j, c in enumerate(NUMERIC_INPUTS):
        inputs[:, j] = (
            pd.to_numeric(tasks[c], errors="coerce").to_numpy(
                dtype=np.float64, na_value=np.nan
            )
            if c in tasks.columns
            else np.nan
        )
    created = creation_times(tasks["creationdate"].reset_index(drop=True))
    numeric = numeric_features(inputs, created=creation_fields(created))
    for j, name in enumerate(TASK_NUMERIC_FEATURES):
        raw[name] = numeric[:, j]
    return raw


def number_value(value: Any) -> float:
    """Return one value as ``pd.to_numeric(errors="coerce")`` reads it (NaN if not)."""
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)  # bool is an int: True -> 1.0, as pandas reads it
    if is_null(value):
        return np.nan
    # Text, Decimal and the like are rare: let pandas decide, as the frame path does.
    out = pd.to_numeric(pd.Series([value], dtype=object), errors="coerce")
    return float(out.iloc[0]) if out.notna().iloc[0] else np.nan


def record_numeric_features(records: list[Mapping[str, Any]]) -> np.ndarray:
    """Return :func:`numeric_features` of task records (a missing request is NaN)."""
    inputs = np.array(
        [[number_value(r.get(c)) for c in NUMERIC_INPUTS] for r in records],
        dtype=np.float64,
    ).reshape(len(records), len(NUMERIC_INPUTS))
    created = record_creation_fields([r.get("creationdate") for r in records])
    return numeric_features(inputs, created=created)
