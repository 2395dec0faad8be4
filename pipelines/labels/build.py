"""Compute the scout labels of the whole history, chunk by chunk, and store them.

The runner reads ``(tasks, jobs)`` chunks with
:func:`panda_predictor.db.reader.iter_history`, labels each chunk with the vectorised
:func:`panda_predictor.core.labels.labels_frame` (the reader keeps a task's jobs in the
same chunk as the task), and writes one parquet file under ``settings.home``. With
``fit_bins_path`` it also fits the class edges from the labels' quantiles and saves
them as a bins YAML file.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from sqlalchemy.engine import Engine
from tqdm import tqdm

from panda_predictor.bins_file import save_bins
from panda_predictor.core.bins import BinSet, fit_bins
from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.label_values import (
    DEFAULT_LABEL_PARAMS,
    LABEL_COLUMNS,
    LabelParams,
)
from panda_predictor.core.labels import JOB_COLUMNS, TASK_COLUMNS, labels_frame
from panda_predictor.db.engine import make_engine
from panda_predictor.db.reader import iter_history
from panda_predictor.errors import UserInputError
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

#: File name of the labels under ``settings.home``.
LABELS_FILE = "labels.parquet"
DEFAULT_CHUNK_SIZE = 2000


@dataclass(frozen=True)
class LabelsRun:
    """What :func:`run` produced."""

    labels_path: Path
    n_tasks: int
    n_labelled: int
    bins_path: Path | None = None


def build_labels(
    engine: Engine,
    settings: Settings,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
    progress: bool = True,
) -> pd.DataFrame:
    """Return the labels of every task in the history, one row per JEDITASKID.

    Parameters
    ----------
    engine:
        Database holding PanDA's tables.
    settings:
        Settings naming the schema.
    chunk_size:
        Tasks read per chunk (bounds the memory).
    params:
        Constants of the label formulas.
    progress:
        Show a tqdm progress bar on stderr.
    """
    parts = []
    with tqdm(desc="labels", unit="task", disable=not progress) as bar:
        for tasks, jobs in iter_history(engine, settings, chunk_size=chunk_size):
            parts.append(labels_frame(jobs, tasks, params))
            bar.update(len(tasks))
    if not parts:
        return labels_frame(
            pd.DataFrame(columns=list(JOB_COLUMNS)),
            pd.DataFrame(columns=list(TASK_COLUMNS)),
            params,
        )
    labels = pd.concat(parts, ignore_index=True)
    return labels.drop_duplicates("jeditaskid", keep="last").reset_index(drop=True)


def write_labels(labels: pd.DataFrame, path: Path) -> Path:
    """Write the labels frame as parquet (parent folders created); return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    labels[list(LABEL_COLUMNS)].to_parquet(path, index=False)
    return path


def read_labels(path: Path) -> pd.DataFrame:
    """Read a labels parquet file written by :func:`write_labels`."""
    return pd.read_parquet(path)


def fit_bins_from_labels(labels: pd.DataFrame, version: str | None = None) -> BinSet:
    """Fit class edges per target from the labelled history (tasks with scouts only).

    Parameters
    ----------
    labels:
        Frame of :func:`build_labels`.
    version:
        Version string; default ``fitted-<UTC time>``.
    """
    values = {
        name: labels[name].dropna().to_numpy(dtype=float)
        for name in TARGET_NAMES
        if labels[name].notna().any()
    }
    if not values:
        raise UserInputError(
            "The labels must hold at least one task with scout measurements to fit "
            f"bins. Got {len(labels)} tasks without any instead."
        )
    version = version or f"fitted-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    return fit_bins(values, version=version)


def run(
    settings: Settings,
    out: Path | None = None,
    fit_bins_path: Path | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: bool = True,
) -> LabelsRun:
    """Label the history in ``settings``' database, write parquet, optionally fit bins.

    Parameters
    ----------
    settings:
        Settings (database URL, schema, ``home``).
    out:
        Parquet file to write; default ``<home>/labels.parquet``.
    fit_bins_path:
        If given, fit bins from the labels and save them there as YAML.
    chunk_size:
        Tasks read per chunk.
    progress:
        Show a progress bar.
    """
    engine = make_engine(settings)
    try:
        labels = build_labels(
            engine, settings, chunk_size=chunk_size, progress=progress
        )
    finally:
        engine.dispose()
    return _store(labels, settings, out, fit_bins_path)


def run_sql(
    settings: Settings,
    chunk_size: int = 20_000,
    out: Path | None = None,
    fit_bins_path: Path | None = None,
    progress: bool = True,
) -> LabelsRun:
    """Label the history inside the database (PostgreSQL, Oracle); store as ``run``.

    One aggregation query per ``chunk_size`` tasks, selected by JEDITASKID range
    (:func:`panda_predictor.db.labels_sql.labels_by_range`); only one row per task
    leaves the database. SQLite lacks ``percentile_cont``: a clear error says so.
    """
    from panda_predictor.db.engine import get_panda_tables
    from panda_predictor.db.labels_sql import LabelsSqlUnsupported, labels_by_range

    engine = make_engine(settings)
    try:
        tables = get_panda_tables(settings, engine)
        labels = labels_by_range(engine, tables, chunk_size, progress=progress)
    except LabelsSqlUnsupported as exc:
        raise UserInputError(str(exc)) from None
    finally:
        engine.dispose()
    return _store(labels, settings, out, fit_bins_path)


def run_spark(
    settings: Settings,
    input_dir: str | Path,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    out: Path | None = None,
    fit_bins_path: Path | None = None,
    progress: bool = True,
) -> LabelsRun:
    """Label Parquet exports on Spark (:mod:`pipelines.labels.spark`); store as ``run``.

    Parameters
    ----------
    settings:
        Settings (``home``, where the labels go by default).
    input_dir:
        Folder of ``jedi_tasks/`` and ``jobsarchived4/`` Parquet datasets.
    master, conf:
        Spark master URL and extra Spark settings.
    out, fit_bins_path, progress:
        As for :func:`run`.
    """
    from pipelines.labels.spark import running_session, spark_labels

    with running_session(master, conf) as spark:
        labels = spark_labels(spark, input_dir, progress=progress)
    return _store(labels, settings, out, fit_bins_path)


def _store(
    labels: pd.DataFrame,
    settings: Settings,
    out: Path | None,
    fit_bins_path: Path | None,
) -> LabelsRun:
    """Write the labels (and fitted bins); return what was written."""
    path = write_labels(labels, out or settings.home / LABELS_FILE)
    n_labelled = int((labels["n_scouts"] > 0).sum())
    log.info(
        "Wrote labels of %d tasks (%d with scouts) to %s", len(labels), n_labelled, path
    )
    bins_path = None
    if fit_bins_path is not None:
        bins_path = save_bins(fit_bins_from_labels(labels), fit_bins_path)
        log.info("Wrote bins fitted on %d tasks to %s", n_labelled, bins_path)
    return LabelsRun(path, len(labels), n_labelled, bins_path)
