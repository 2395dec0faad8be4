"""The error types for problems the user or operator fixes from the message alone.

:class:`UserFixableError` is the one contract the command line relies on: it turns
every subclass into one line and a non-zero exit (see
:func:`panda_predictor.cli.errors.user_errors`); any other exception is a bug and keeps
its traceback (STYLE.md point 6). :class:`UserInputError` is the part of it about what
the user gave (files, options, settings, tasks); the database's and the registry's
errors are the other part: not bad input, but their messages name the cause and the
fix (a setting, a grant, ``db upgrade``). This module imports nothing, so every layer,
the pure core included, may raise them.
"""

from __future__ import annotations


class UserFixableError(Exception):
    """Raised when the message alone lets the user or operator fix the problem.

    Not raised itself: subclass it together with the built-in type callers catch
    (``ValueError`` for bad input, ``RuntimeError`` for an unreachable service), so
    the command line finds every such error by this one base instead of a list.
    """


class UserInputError(UserFixableError, ValueError):
    """Raised when a file, option, setting or task definition the user gave is wrong.

    The message names what was expected, what came and, where it helps, the fix. It is
    a ``ValueError``, so code that catches ``ValueError`` keeps working.
    """


class OptionError(UserInputError):
    """Raised when a command-line option's value is wrong (a port, a path).

    The command line reports it as click reports its own option errors: with the
    usage hint and exit code 2, so a script sees the same code for every bad option.
    """
