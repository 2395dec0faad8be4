"""Turn the errors a user can fix into one clear line and a non-zero exit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from panda_predictor.errors import OptionError, UserFixableError


@contextmanager
def user_errors() -> Iterator[None]:
    """Re-raise what the user can fix as a ``click.ClickException`` (one line).

    Converted by class, not by a list of adapters' errors: every
    :class:`~panda_predictor.errors.UserFixableError` (bad input, i.e.
    ``UserInputError`` and its settings, bins, task definition subclasses, and the
    database's and the registry's errors, whose messages name the cause and the fix)
    exits 1; an :class:`~panda_predictor.errors.OptionError` exits 2 with the usage
    hint, as click's own option errors do; a missing file exits 1. Anything else, a
    plain ``ValueError`` included, is a bug and keeps its traceback (STYLE.md point 6).
    """
    try:
        yield
    except OptionError as exc:
        raise click.UsageError(str(exc)) from None
    except (UserFixableError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from None
