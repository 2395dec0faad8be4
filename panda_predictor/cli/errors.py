"""Turn the errors a user can fix into one clear line and a non-zero exit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from panda_predictor.errors import UserInputError


@contextmanager
def user_errors() -> Iterator[None]:
    """Re-raise what the user can fix as ``click.ClickException`` (one line, exit 1).

    Converted: :class:`~panda_predictor.errors.UserInputError` (a file, option,
    setting or task definition is wrong: bins files, settings and task definitions
    raise subclasses of it), a missing file, and the database's and the registry's
    own errors, whose messages name the cause and the fix. Anything else, a plain
    ``ValueError`` included, is a bug and keeps its traceback (STYLE.md point 6).
    """
    from model_registry.registry import RegistryError
    from panda_predictor.db.engine import DatabaseError
    from panda_predictor.settings import SettingsError

    try:
        yield
    except (
        UserInputError,
        FileNotFoundError,
        DatabaseError,
        SettingsError,
        RegistryError,
    ) as exc:
        raise click.ClickException(str(exc)) from None
