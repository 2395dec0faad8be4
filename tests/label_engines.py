"""The four ways labels are computed, for tests that run one history through each.

``reader-sqlite`` and ``reader-postgresql`` build the labels from the history
reader (pandas), ``sql`` in the database (:mod:`panda_predictor.db.labels_sql`),
``spark`` on the exported Parquet folders. A test fixture parametrised with
:data:`ENGINES` loads its history with ``load(settings)`` and calls
:func:`labels_by`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import pytest
from conftest import POSTGRES_URL

from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.settings import Settings, load_settings
from pipelines.labels.build import build_labels

ENGINES = [
    "reader-sqlite",
    pytest.param("reader-postgresql", marks=pytest.mark.postgres),
    pytest.param("sql", marks=pytest.mark.postgres),
    pytest.param("spark", marks=pytest.mark.spark),
]


def sqlite_settings(tmp_path: Path) -> Settings:
    """Return settings of an empty SQLite database in ``tmp_path``."""
    return load_settings(home=tmp_path, db_url=f"sqlite:///{tmp_path / 'p.sqlite'}")


def labels_by(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    load: Callable[[Settings], None],
    task_ids: Sequence[int],
    exported: str,
) -> pd.DataFrame:
    """Return the labels of the history ``load`` writes, by engine ``request.param``.

    ``exported`` names a folder the Parquet export must hold for Spark (the table
    under test), so a Spark run that silently missed it fails.
    """
    kind = request.param
    if kind in ("reader-postgresql", "sql"):
        schema = request.getfixturevalue("pg_schema")
        settings = load_settings(home=tmp_path, db_url=POSTGRES_URL, db_schema=schema)
    else:
        settings = sqlite_settings(tmp_path)
    load(settings)
    if kind == "spark":
        from pipelines.export import export_history
        from pipelines.labels.spark import spark_labels

        export_history(settings, tmp_path / "export", progress=False)
        assert (tmp_path / "export" / exported).is_dir()
        return spark_labels(request.getfixturevalue("spark"), tmp_path / "export")
    engine = make_engine(settings)
    try:
        if kind == "sql":
            from panda_predictor.db.labels_sql import labels_from_db

            return labels_from_db(engine, get_panda_tables(settings, engine), task_ids)
        return build_labels(engine, settings, progress=False)
    finally:
        engine.dispose()
