"""A tiny model bundle for the registry's tests, whose every file carries a marker.

The registry, its cache and the gate only move a bundle's files around; they never
load the models. A manifest plus one small JSON file per target is enough, and a
marker in each file shows whether a folder was copied whole (one marker) or mixed
from two versions.
"""

from __future__ import annotations

import json
from pathlib import Path

from panda_predictor.core.domain.targets import TARGETS


def make_bundle(folder: Path, marker: str, schema_hash: str = "h1") -> Path:
    """Write a manifest and one model file per target, each carrying ``marker``."""
    (folder / "models").mkdir(parents=True)
    manifest = {"schema_hash": schema_hash, "bins_version": "bins-1", "marker": marker}
    (folder / "bundle.json").write_text(json.dumps(manifest))
    for target in TARGETS:
        (folder / "models" / f"{target}.json").write_text(json.dumps({"m": marker}))
    return folder
