"""Keep a moved local store working: re-anchor its artifact paths under its folder.

A local MLflow store (the SQLite file ``<home>/mlflow.db`` with its artifacts in
``<home>/mlartifacts``) records absolute artifact locations, so copying ``<home>``
elsewhere would leave every run and model version pointing at the old place. The
product creates each experiment at ``<artifact root>/<experiment name>``, so the
old root can be read back from an experiment row: when that folder is gone and the
same experiment folder exists under the current artifact root, every recorded
location under the old root is rewritten to the new one, in one transaction.

Only the product's own layout is touched: an experiment elsewhere, a location that
still exists, or a server store is left alone. Runs once per process and store.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)

#: (table, column) pairs of the MLflow SQL schema that hold artifact locations.
LOCATION_COLUMNS = (
    ("experiments", "artifact_location"),
    ("runs", "artifact_uri"),
    ("model_versions", "source"),
    ("model_versions", "storage_location"),
    ("logged_models", "artifact_location"),
)

_lock = threading.Lock()
_checked: set[tuple[str, str]] = set()


def _local_folder(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and uri.startswith("/"):
        return Path(uri)
    return None


def moved_roots(locations: list[tuple[str, str]], new_root: str) -> dict[str, str]:
    """Return ``{old root: new root}`` for experiments whose store folder moved.

    Parameters
    ----------
    locations:
        ``(experiment name, artifact location)`` pairs as the store records them.
    new_root:
        The current artifact root (``settings.artifact_root()``).
    """
    moves: dict[str, str] = {}
    new_root = new_root.rstrip("/")
    for name, location in locations:
        suffix = f"/{name}"
        if not location or not location.endswith(suffix):
            continue
        old_root = location[: -len(suffix)]
        if old_root == new_root:
            continue
        old_folder, new_folder = (
            _local_folder(location),
            _local_folder(f"{new_root}{suffix}"),
        )
        if old_folder is None or new_folder is None:
            continue
        if not old_folder.exists() and new_folder.is_dir():
            moves[old_root] = new_root
    return moves


def reanchor_store(settings: Settings) -> dict[str, str]:
    """Rewrite the artifact locations of a moved SQLite store; return the moves.

    Does nothing (and returns ``{}``) for server stores, file stores, stores that
    did not move, and on every call after the first for the same store and root.
    """
    uri = settings.tracking_uri()
    if urlparse(uri).scheme != "sqlite":
        return {}
    key = (uri, settings.artifact_root())
    import sqlite3

    with _lock:
        if key in _checked:
            return {}
        try:
            moves = _reanchor(uri, settings.artifact_root())
        except sqlite3.Error as exc:
            # Best effort: a damaged or locked store is the registry's to report
            # (and the cache's to cover); re-anchoring never adds a failure.
            logger.warning("MLflow store %s not checked for a move: %s", uri, exc)
            return {}
        _checked.add(key)
    return moves


def _reanchor(uri: str, new_root: str) -> dict[str, str]:
    """Read the experiments and rewrite moved locations (stdlib sqlite3: ~1 ms)."""
    import sqlite3

    path = uri[len("sqlite:///") :].split("?", 1)[0]
    if not path or not Path(path).is_file():
        return {}
    conn = sqlite3.connect(path, timeout=30)
    try:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT /* relocation.reanchor_store */ name FROM sqlite_master "
                "WHERE type = 'table'"
            )
        }
        if "experiments" not in tables:
            return {}
        rows = conn.execute(
            "SELECT /* relocation.reanchor_store */ name, artifact_location "
            "FROM experiments"
        ).fetchall()
        moves = moved_roots([(r[0], r[1] or "") for r in rows], new_root)
        with conn:  # one transaction: all locations move, or none
            for old, new in moves.items():
                for table, column in LOCATION_COLUMNS:
                    if table not in tables:
                        continue
                    conn.execute(
                        f"UPDATE /* relocation.reanchor_store */ {table} "
                        f"SET {column} = ? || substr({column}, ?) "
                        f"WHERE substr({column}, 1, ?) = ?",
                        (new, len(old) + 1, len(old) + 1, f"{old}/"),
                    )
        for old, new in moves.items():
            logger.warning(
                "The MLflow store %s moved: artifact locations re-anchored from %s "
                "to %s",
                uri,
                old,
                new,
            )
    finally:
        conn.close()
    return moves
