"""Read the labelled history out of the database: tasks, their labels, in time order.

One pass over :func:`panda_predictor.db.reader.iter_history` yields, chunk by chunk,
the tasks (JEDI_TASKS + input-dataset counts) and their job records; the scout labels
are computed per chunk, so job records never pile up in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd
from sqlalchemy.engine import Engine
from tqdm import tqdm

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.features.history import HISTORY_GROUPS, required_columns
from panda_predictor.core.features.pipeline import TASK_COLUMNS
from panda_predictor.core.features.task_features import REQUEST_COLUMNS
from panda_predictor.core.label_values import DEFAULT_LABEL_PARAMS, LabelParams
from panda_predictor.core.labels import join_labels
from panda_predictor.db.reader import INPUT_TYPES, iter_history
from panda_predictor.errors import UserInputError
from panda_predictor.settings import Settings

#: Columns of the labelled history frame the feature pipeline reads.
HISTORY_KEY_COLUMNS = sorted(required_columns(HISTORY_GROUPS))


@dataclass(frozen=True)
class LabelledHistory:
    """Tasks (one row each, oldest first) with their four labels and when known.

    ``frame`` holds the task columns the features need, the four normalised labels
    (NaN where the scouts could not measure one) and ``labels_known_at``.
    """

    frame: pd.DataFrame

    @property
    def tasks(self) -> pd.DataFrame:
        """Return the task columns (input of FeaturePipeline.transform)."""
        cols = [*TASK_COLUMNS, *REQUEST_COLUMNS]
        return self.frame[[c for c in cols if c in self.frame.columns]]

    @property
    def history(self) -> pd.DataFrame:
        """Return the labelled history frame (input of the history features).

        It holds the task columns too, so a predictor can rebuild its model's
        track record from it (see :mod:`panda_predictor.serving.combination`).
        """
        cols = [
            *TASK_COLUMNS,
            *HISTORY_KEY_COLUMNS,
            *REQUEST_COLUMNS,
            "labels_known_at",
            *TARGET_NAMES,
        ]
        return self.frame[[c for c in dict.fromkeys(cols) if c in self.frame.columns]]


def label_chunk(
    tasks: pd.DataFrame,
    jobs: pd.DataFrame,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
) -> pd.DataFrame:
    """Return the feature and history-key columns of ``tasks`` with their labels."""
    return join_labels(tasks, jobs, [*TASK_COLUMNS, *HISTORY_KEY_COLUMNS], params)


def frames_to_history(
    tasks: pd.DataFrame,
    datasets: pd.DataFrame,
    jobs: pd.DataFrame,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
) -> pd.DataFrame:
    """Return what :func:`label_chunk` returns, from in-memory PanDA table frames.

    Mirrors the reader's input-dataset aggregates (count, NFILES and NEVENTS sums
    over ``input``/``pseudo_input`` datasets), so benchmarks can skip the database.
    """
    inputs = datasets[datasets["type"].isin(INPUT_TYPES)]
    agg = inputs.groupby("jeditaskid").agg(
        n_input_datasets=("datasetid", "size"),
        nfiles_sum=("nfiles", "sum"),
        nevents_sum=("nevents", "sum"),
    )
    merged = tasks.merge(agg, left_on="jeditaskid", right_index=True, how="left")
    merged["n_input_datasets"] = merged["n_input_datasets"].fillna(0).astype("int64")
    return label_chunk(merged, jobs, params)


def _label_lookup(labels: pd.DataFrame) -> pd.DataFrame:
    """Return the columns of a labels file the history needs, or a clear error."""
    needed = ["jeditaskid", *TARGET_NAMES, "labels_known_at"]
    missing = [c for c in needed if c not in labels.columns]
    if missing:
        raise UserInputError(
            f"The labels file must have the columns {needed}. Got "
            f"{sorted(map(str, labels.columns))} instead; missing {missing}."
        )
    return labels[needed].drop_duplicates("jeditaskid", keep="last")


def read_labelled_history(
    engine: Engine,
    settings: Settings,
    chunk_size: int = 5000,
    progress: bool = True,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
    since: datetime | None = None,
    until: datetime | None = None,
    labels: pd.DataFrame | None = None,
) -> LabelledHistory:
    """Return every finished task of the database with its labels, oldest first.

    Tasks without any usable scout (no label at all) are dropped: they teach nothing.

    Parameters
    ----------
    engine, settings:
        The PanDA database and the settings naming its schema.
    chunk_size:
        Tasks per read (bounds memory).
    progress:
        Show a progress bar on stderr.
    params:
        Constants of the scout formulas.
    since, until:
        Only tasks created in ``[since, until)`` (a retraining window).
    labels:
        Labels computed elsewhere (``panda-predictor labels``, e.g. on Spark): the
        job rows are then not read, and a task missing from ``labels`` has none.
    """
    parts = []
    known = None if labels is None else _label_lookup(labels)
    with tqdm(desc="read history", unit="task", disable=not progress) as bar:
        for tasks, jobs in iter_history(
            engine,
            settings,
            chunk_size=chunk_size,
            since=since,
            until=until,
            with_jobs=known is None,
        ):
            if known is None:
                parts.append(label_chunk(tasks, jobs, params))
            else:
                keep = [*TASK_COLUMNS, *HISTORY_KEY_COLUMNS]
                columns = [c for c in dict.fromkeys(keep) if c in tasks.columns]
                parts.append(tasks[columns].merge(known, on="jeditaskid", how="left"))
            bar.update(len(tasks))
    if not parts:
        raise UserInputError(
            "The history must hold finished tasks with scout jobs to train on. Got an "
            "empty JEDI_TASKS/JOBSARCHIVED4: run 'panda-predictor simulate' or point "
            "PANDA_PREDICTOR_DB_URL at a PanDA database."
        )
    frame = pd.concat(parts, ignore_index=True)
    frame = frame[frame[list(TARGET_NAMES)].notna().any(axis=1)]
    frame = frame.sort_values(["creationdate", "jeditaskid"], kind="stable")
    return LabelledHistory(frame.reset_index(drop=True))


def history_with_labels(
    settings: Settings, labels_file: Path, progress: bool = True
) -> LabelledHistory:
    """Return the database's tasks with the labels of ``labels_file`` (no job read).

    Parameters
    ----------
    settings:
        Settings naming the database.
    labels_file:
        Parquet written by ``panda-predictor labels`` (either engine).
    progress:
        Show a progress bar.
    """
    from panda_predictor.db.engine import make_engine

    labels = pd.read_parquet(labels_file)
    engine = make_engine(settings)
    try:
        return read_labelled_history(engine, settings, progress=progress, labels=labels)
    finally:
        engine.dispose()
