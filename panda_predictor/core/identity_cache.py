"""Keep a value derived from some objects until one of them is replaced.

A fitted object (a feature pipeline, a calibrator) derives lookup tables from its
learned state (knots, vocabularies, the schema) and from what it is given (a
history index), and the served history derives the experts' records from the
bundle it is asked about; building them costs more than one task's whole use of
them, so they are built once and kept for the last sources seen. The learned state
is replaced, never changed in place (``fit`` and ``from_dict`` assign new lists), so
"the same objects" is the test: identity, which costs nothing, rather than
equality, which costs a comparison of thousands of values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def cached_by_identity(
    owner: Any, name: str, sources: tuple[Any, ...], build: Callable[[], T]
) -> T:
    """Return ``build()``, kept on ``owner`` as ``name`` while ``sources`` are the
    same objects as when it was built.

    :param owner: the object that keeps the value (in its ``__dict__``).
    :param name: the attribute that holds it, private to the owner's class.
    :param sources: the objects the value is derived from.
    :param build: computes the value from them.
    """
    cached = owner.__dict__.get(name)
    if cached is not None:
        kept, value = cached
        if len(kept) == len(sources) and all(
            a is b for a, b in zip(kept, sources, strict=True)
        ):
            return value
    value = build()
    owner.__dict__[name] = (sources, value)
    return value
