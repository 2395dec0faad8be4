"""The one "used before ``fit``" contract of every estimator in the project.

The feature pipeline, the classifiers, the tail rules and the calibrators all learn
state in ``fit`` (attributes ending in ``_``) and must refuse to run without it. They
share one exception type, so a caller catches one thing whatever it used too early,
and one check, so the message always names the estimator and what to call first.
The idea is scikit-learn's ``check_is_fitted``; the code is our own, since the core
does not depend on scikit-learn. Pure: imports nothing from the project.
"""

from __future__ import annotations

from collections.abc import Sequence


class NotFittedError(ValueError, AttributeError):
    """Raised when an estimator is used before ``fit`` (scikit-learn's bases).

    ``ValueError`` and ``AttributeError`` both, as in scikit-learn, so code written
    against either convention keeps catching it.
    """


def check_is_fitted(
    estimator: object,
    attributes: str | Sequence[str],
    call_first: str = "Call 'fit' first.",
) -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has all of ``attributes``.

    Parameters
    ----------
    estimator:
        The object used; its class name opens the message.
    attributes:
        The learned attribute (or attributes) that ``fit`` sets; all must be present.
    call_first:
        The sentence that tells the caller what to call first (which method, with
        what), appended to the message.
    """
    if isinstance(attributes, str):
        # The usual call (one attribute, fitted): one lookup, since every served
        # task passes here a dozen times.
        if hasattr(estimator, attributes):
            return
        names: tuple[str, ...] = (attributes,)
    else:
        names = tuple(attributes)
    if not names:
        raise ValueError("check_is_fitted needs at least one attribute name.")
    if any(not hasattr(estimator, name) for name in names):
        raise NotFittedError(
            f"This {type(estimator).__name__} is not fitted yet. {call_first}"
        )
