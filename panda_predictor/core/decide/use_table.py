"""How the use of one target is spread inside each of its classes.

The cost choice (:mod:`panda_predictor.core.decide.cost_choice`) prices a value
against a distribution of the task's use: the models give the probability of each
class, and this table says how the use is spread inside a class (a few quantiles of
the training values of that class). Training fits it; the bundle stores it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Quantiles kept per class in a :class:`UseTable`. The table's top point stands
#: for the top ``1 / (2 * DEFAULT_POINTS)`` of the class, which it cannot see above
#: it: with 20 points a value at the top point was priced as never short, yet failed
#: 2.5 % of that class's jobs, and the cost choice wrote values that failed more
#: jobs than even the dearest delay price intended (docs/decisions.md, "The use
#: inside a class"). With 100 the blind tail is 0.5 %.
DEFAULT_POINTS = 100


@dataclass(frozen=True)
class UseTable:
    """How the use of one target is spread inside each of its classes.

    ``points[k]`` holds :data:`DEFAULT_POINTS` ascending quantiles (at the middle
    of equal probability slices) of the training values of class k, so the use of a
    task of class k is taken as equally likely to be any of them.
    """

    points: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        array = np.asarray(self.points, dtype=float)
        if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
            raise ValueError(
                "The 'points' field must be a K x Q table of numbers. "
                f"Got shape {array.shape} instead."
            )
        if not np.all(np.isfinite(array)) or np.any(np.diff(array, axis=1) < 0):
            raise ValueError(
                "The 'points' field must hold finite numbers, ascending per class. "
                f"Got {array.tolist()!r:.200} instead."
            )

    @property
    def array(self) -> np.ndarray:
        """Return the K x Q table as a float array."""
        return np.asarray(self.points, dtype=float)

    @classmethod
    def fit(
        cls,
        values: Any,
        classes: Any,
        bins: Any,
        n_points: int = DEFAULT_POINTS,
    ) -> UseTable:
        """Return the table of the training ``values`` of each class of ``bins``.

        A class without training values falls back to :meth:`from_bins`'s spread.
        """
        values = np.asarray(values, dtype=float)
        classes = np.asarray(classes)
        fallback = cls.from_bins(bins, n_points).array
        mids = (np.arange(n_points) + 0.5) / n_points
        rows = []
        for k in range(bins.n_classes):
            inside = values[(classes == k) & np.isfinite(values)]
            if inside.size:
                rows.append(tuple(float(q) for q in np.quantile(inside, mids)))
            else:
                rows.append(tuple(float(q) for q in fallback[k]))
        return cls(tuple(rows))

    @classmethod
    def from_bins(cls, bins: Any, n_points: int = DEFAULT_POINTS) -> UseTable:
        """Return a table spread evenly over each class's range (no training data).

        The lowest class runs from a tenth of its upper edge, the top class from
        its lower edge to 1.5 times it (or to its value, if larger): a guess that
        only bundles trained before use tables existed rely on.
        """
        mids = (np.arange(n_points) + 0.5) / n_points
        rows = []
        for k in range(bins.n_classes):
            low, high = bins.range_of(k)
            value = float(bins.value_of(k))
            if math.isinf(low):
                low = min(0.1 * high, value)
            if math.isinf(high):
                high = max(1.5 * low, value, low + 1.0)
            rows.append(tuple(float(low + (high - low) * m) for m in mids))
        return cls(tuple(rows))

    def to_dict(self) -> dict[str, Any]:
        """Return the table as plain lists."""
        return {"points": [list(row) for row in self.points]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UseTable:
        """Rebuild the table from :meth:`to_dict` output."""
        if not isinstance(data, Mapping) or "points" not in data:
            raise ValueError(
                "A use table must be a mapping with 'points'. "
                f"Got {data!r:.200} instead."
            )
        return cls(tuple(tuple(float(v) for v in row) for row in data["points"]))
