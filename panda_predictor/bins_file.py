"""Load and save the resource classes (a :class:`~.core.bins.BinSet`) as YAML.

File access lives here, outside the pure core. Errors name the file and the field, so
an operator can fix a hand-edited bins file without reading code.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from panda_predictor import resources
from panda_predictor.core.bins import BinSet
from panda_predictor.errors import UserInputError
from panda_predictor.settings import Settings

#: Name of the packaged default bins file in :mod:`panda_predictor.resources`.
DEFAULT_BINS_RESOURCE = "bins.yaml"

_HEADER = """\
# Resource classes per target, written by panda-predictor (see docs/labels.md).
# k edges make k+1 classes; `values` is what each class writes back, in `unit`.
# Bump `version` whenever you edit this file.
"""


class BinsFileError(UserInputError):
    """A bins file is missing or invalid; the message names the file and the field."""


def _parse(data: object, where: str) -> BinSet:
    if not isinstance(data, dict):
        raise BinsFileError(
            f"The bins file {where} must hold a mapping with 'version' and 'targets'. "
            f"Got {type(data).__name__} instead."
        )
    try:
        return BinSet.from_dict(data)
    except (ValueError, KeyError) as exc:
        raise BinsFileError(f"The bins file {where} is invalid: {exc}") from None


def load_bins(path: Path | str | None = None) -> BinSet:
    """Read a bins YAML file; without ``path``, the packaged defaults.

    Parameters
    ----------
    path:
        YAML file written by :func:`save_bins` (or edited by hand).
    """
    if path is None:
        where = f"'panda_predictor/resources/{DEFAULT_BINS_RESOURCE}'"
        return _parse(resources.load_yaml(DEFAULT_BINS_RESOURCE), where)
    path = Path(path)
    where = repr(str(path))
    if not path.is_file():
        raise BinsFileError(
            f"The bins file {where} does not exist. Write one with "
            "'panda-predictor labels --fit-bins PATH' or unset the bins_file setting."
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BinsFileError(f"The bins file {where} is not valid YAML: {exc}") from None
    return _parse(data, where)


def bins_from_settings(settings: Settings) -> BinSet:
    """Return the bins named by ``settings.bins_file``, or the packaged defaults."""
    return load_bins(settings.bins_file)


def save_bins(bins: BinSet, path: Path | str) -> Path:
    """Write ``bins`` as YAML to ``path`` (parent folders created); return the path.

    Parameters
    ----------
    bins:
        The bin set to write.
    path:
        Destination file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.safe_dump(bins.to_dict(), sort_keys=False, default_flow_style=None)
    path.write_text(_HEADER + body, encoding="utf-8")
    return path
