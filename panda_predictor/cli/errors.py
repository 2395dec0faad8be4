"""Turn the errors a user can fix into one clear line and a non-zero exit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click


@contextmanager
def user_errors() -> Iterator[None]:
    """Re-raise input, configuration and database errors as ``click.ClickException``.

    Only errors whose message already names the problem and the fix are converted;
    anything else is a bug and keeps its traceback.
    """
    from model_registry.registry import RegistryError
    from panda_predictor.db.engine import DatabaseError
    from panda_predictor.settings import SettingsError

    try:
        yield
    except (
        ValueError,
        FileNotFoundError,
        DatabaseError,
        SettingsError,
        RegistryError,
    ) as exc:
        raise click.ClickException(str(exc)) from None
