"""One row of class probabilities in plain Python, with numpy's bits.

One task's decision works on rows of 2 to 5 class probabilities, and a numpy call
on such a row costs a microsecond or two of dispatch whatever it computes: the
calibration of one target made about twenty of them. Plain Python floats do the
same arithmetic (IEEE double, the same operation in the same order) in a tenth of
the time, so the one-row routes use these helpers instead, and give the array
routes' answer bit for bit:

* elementwise ``+ - * /`` are the same operation on the same doubles;
* numpy sums a row of fewer than :data:`EXACT_SUM_BELOW` values one after another
  from the first (its pairwise summation unrolls by eight only from there), which
  is what :func:`row_sum` does;
* :func:`interp` follows ``np.interp``'s own steps (numpy's
  ``compiled_base.c``): the knot at or below the value, the end values outside
  the knots, the knot's own value on a knot, else ``slope * (x - x_j) + y_j``.

Tests compare every helper with its numpy counterpart on random rows
(``tests/core/decide/test_row_math.py``).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence

#: Rows shorter than this are summed by numpy in plain order (see the module
#: docstring); longer ones must take the array route.
EXACT_SUM_BELOW = 8


def row_sum(row: Sequence[float]) -> float:
    """Return ``np.add.reduce`` of a row shorter than :data:`EXACT_SUM_BELOW`."""
    total = row[0]
    for value in row[1:]:
        total += value
    return total


def normalised(row: list[float]) -> list[float]:
    """Return the row scaled to sum to 1, a zero row uniform (the one-row form of
    ``calibration._normalised``)."""
    total = row_sum(row)
    if total > 0:
        return [value / total for value in row]
    return [1.0 / len(row)] * len(row)


def argmax(row: Sequence[float]) -> int:
    """Return the index of the largest value, the first one on a tie (as numpy)."""
    best, index = row[0], 0
    for i in range(1, len(row)):
        if row[i] > best:
            best, index = row[i], i
    return index


def interp(x: float, knots_x: Sequence[float], knots_y: Sequence[float]) -> float:
    """Return ``np.interp(x, knots_x, knots_y)`` for increasing ``knots_x``."""
    if math.isnan(x):
        return x
    last = len(knots_x) - 1
    if x < knots_x[0]:
        return knots_y[0]
    if x > knots_x[last]:
        return knots_y[last]
    j = bisect_right(knots_x, x) - 1
    if j == last or knots_x[j] == x:
        return knots_y[j]
    slope = (knots_y[j + 1] - knots_y[j]) / (knots_x[j + 1] - knots_x[j])
    out = slope * (x - knots_x[j]) + knots_y[j]
    if math.isnan(out):
        out = slope * (x - knots_x[j + 1]) + knots_y[j + 1]
        if math.isnan(out) and knots_y[j] == knots_y[j + 1]:
            out = knots_y[j]
    return out
