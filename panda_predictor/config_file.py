"""Read the settings' YAML config file, and hand it to pydantic-settings as a source.

The file is named by ``--config`` or :data:`CONFIG_ENV`; it ranks below the
environment. Not here: the settings themselves and their defaults (settings.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

#: The environment variable naming the config file.
CONFIG_ENV = "PANDA_PREDICTOR_CONFIG"


class ConfigFileError(ValueError):
    """The config file is missing or holds no YAML mapping; the message says which."""


class YamlSource(PydanticBaseSettingsSource):
    """Settings from a YAML mapping, below the environment in priority."""

    def __init__(self, settings_cls: type[BaseSettings], values: dict[str, Any]):
        super().__init__(settings_cls)
        self._values = values

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


def read_config_file(path: Path) -> dict[str, Any]:
    """Return the mapping of setting names to values the YAML file ``path`` holds."""
    if not path.is_file():
        raise ConfigFileError(
            f"The config file {str(path)!r} does not exist. Create it or unset "
            f"{CONFIG_ENV}."
        )
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigFileError(
            f"The config file {str(path)!r} must hold YAML. Got a parse error "
            f"instead: {first}"
        ) from None
    if not isinstance(loaded, dict):
        raise ConfigFileError(
            f"The config file {str(path)!r} must hold a mapping of setting names to "
            f"values. Got {type(loaded).__name__} instead."
        )
    return loaded
