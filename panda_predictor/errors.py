"""The error type for problems in what the user gave: files, options, settings, tasks.

The command line turns :class:`UserInputError` (and a few named adapter errors, see
:func:`panda_predictor.cli.errors.user_errors`) into one line and a non-zero exit; any
other exception is a bug and keeps its traceback (STYLE.md point 6). This module
imports nothing, so every layer, the pure core included, may raise it.
"""

from __future__ import annotations


class UserInputError(ValueError):
    """Raised when a file, option, setting or task definition the user gave is wrong.

    The message names what was expected, what came and, where it helps, the fix. It is
    a ``ValueError``, so code that catches ``ValueError`` keeps working.
    """
