"""Numbers in reasons, printed so that the sentence never contradicts them.

A confidence of 0.5996 against a threshold of 0.60 used to read "ramcount 0.60 <
0.60": true for the numbers compared, false for the text people read. Every reason
that prints a number next to the one it was compared with goes through
:func:`number` (or :func:`compared`), which adds digits until the two differ in
print whenever they differ in value.
"""

from __future__ import annotations

import math

#: Most decimals (or significant digits) :func:`number` adds before giving up.
MAX_DIGITS = 12


def _fixed(value: float, decimals: int | None, digits: int) -> str:
    if decimals is None:
        return f"{value:.{digits}g}"
    return f"{value:.{digits}f}"


def number(value: float, versus: float | None = None, decimals: int | None = 2) -> str:
    """Return ``value`` as text that differs from ``versus``'s text if they differ.

    ``decimals`` gives the usual fixed decimals (None: 6 significant digits, as
    ``:g``); more are used only when needed to tell ``value`` from ``versus``,
    which is itself printed with the usual precision.
    """
    value = float(value)
    if math.isnan(value):
        return "NaN"
    start = 6 if decimals is None else decimals
    text = _fixed(value, decimals, start)
    if versus is None or value == float(versus) or math.isnan(float(versus)):
        return text
    digits = start
    # Compared at the same precision: "0.600" would still read equal to "0.60".
    while text == _fixed(float(versus), decimals, digits) and digits < MAX_DIGITS:
        digits += 1
        text = _fixed(value, decimals, digits)
    return text


def compared(
    name: str, value: float, op: str, threshold: float, decimals: int | None = 2
) -> str:
    """Return ``"<name> <value> <op> <threshold>"`` with the value told apart."""
    limit = number(threshold, None, decimals)
    return f"{name} {number(value, threshold, decimals)} {op} {limit}"


__all__ = ["MAX_DIGITS", "compared", "number"]
