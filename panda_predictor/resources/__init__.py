"""Data files shipped inside the package (YAML defaults), read via importlib.resources.

Reading them here, outside the pure core, keeps file access at the edge; the core only
receives the parsed mappings. Not here: code, and the pipelines' parameters
(pipelines/params/).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml


def read_text(name: str) -> str:
    """Return the text of the packaged resource file ``name`` (e.g. ``bins.yaml``)."""
    resource = resources.files(__name__).joinpath(name)
    if not resource.is_file():
        raise FileNotFoundError(
            f"The packaged resource {name!r} does not exist in {__name__}. "
            "Reinstall panda-predictor (package data missing?)."
        )
    return resource.read_text(encoding="utf-8")


def load_yaml(name: str) -> Any:
    """Return the parsed content of the packaged YAML resource ``name``."""
    return yaml.safe_load(read_text(name))
