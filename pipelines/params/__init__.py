"""Versioned YAML parameters of the pipelines, read with :func:`load_params`.

Belongs here: the YAML files and their reader. Not here: deployment settings, which
live in :mod:`panda_predictor.settings`.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from panda_predictor.errors import UserInputError


def load_params(name: str, path: Path | str | None = None) -> dict[str, Any]:
    """Return the parameters in ``path``, or in the packaged ``<name>.yaml``.

    A file the user names that is missing, not YAML or not a mapping raises
    ``FileNotFoundError`` or :class:`~panda_predictor.errors.UserInputError`, which
    the command line reports in one line.
    """
    if path is not None:
        file = Path(path)
        if not file.is_file():
            raise FileNotFoundError(
                f"The parameter file must exist. Got {str(file)!r} instead."
            )
        text = file.read_text()
    else:
        text = resources.files(__name__).joinpath(f"{name}.yaml").read_text()
    where = repr(str(path)) if path is not None else repr(f"{name}.yaml")
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserInputError(
            f"The parameter file {where} must hold YAML. Got a parse error instead: "
            f"{first}"
        ) from None
    if not isinstance(data, dict):
        raise UserInputError(
            f"The parameter file {where} must hold a mapping. Got "
            f"{type(data).__name__} instead."
        )
    return data
