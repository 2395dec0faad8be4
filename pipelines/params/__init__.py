"""Versioned YAML parameters of the pipelines, read with :func:`load_params`."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml


def load_params(name: str, path: Path | str | None = None) -> dict[str, Any]:
    """Return the parameters in ``path``, or in the packaged ``<name>.yaml``."""
    if path is not None:
        file = Path(path)
        if not file.is_file():
            raise FileNotFoundError(
                f"The parameter file must exist. Got {str(file)!r} instead."
            )
        text = file.read_text()
    else:
        text = resources.files(__name__).joinpath(f"{name}.yaml").read_text()
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError(
            f"The parameter file {name!r} must hold a mapping. Got "
            f"{type(data).__name__} instead."
        )
    return data
