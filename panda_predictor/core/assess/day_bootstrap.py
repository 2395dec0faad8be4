"""Resample whole days, the same days for every figure compared (a paired bootstrap).

Tasks or jobs of one day are not independent (a user's burst fills a day with
near-copies), so resampling single rows would make every small difference look
certain. :class:`DayBootstrap` draws whole days with replacement once; every figure
that is a ratio of sums over rows is then recomputed on each resample from its
per-day sums, so comparing two figures on the same draws is paired. Pure numpy:
a thousand resamples of a figure cost one matrix product.

The champion gate's noise (:mod:`pipelines.retraining.gate_evidence`) and the delay
prices' tuning (:mod:`pipelines.training.cost_tuning`) both resample this way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Resamples drawn by default.
N_RESAMPLES = 1000


class DayBootstrap:
    """Draw resampled days once, for every figure compared on them.

    :param days: (n,) the day of each row (any values one day shares).
    :param n_resamples: how many resamples to draw.
    :param seed: the draws' seed (the same seed, the same draws).
    """

    def __init__(self, days: Any, n_resamples: int = N_RESAMPLES, seed: int = 0):
        days = np.asarray(days)
        if days.size == 0:
            raise ValueError("The 'days' field must name at least one row's day.")
        _, self.day_index = np.unique(days, return_inverse=True)
        self.day_index = self.day_index.reshape(-1)
        self.n_days = int(self.day_index.max()) + 1
        rng = np.random.default_rng(seed)
        picks = rng.integers(0, self.n_days, size=(n_resamples, self.n_days))
        self.counts = np.stack(
            [np.bincount(p, minlength=self.n_days) for p in picks]
        ).astype(float)

    def resampled(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        """Return the metric ``sum(num) / sum(den)`` on every resample (NaN: 0/0)."""
        day_num = np.bincount(self.day_index, weights=num, minlength=self.n_days)
        day_den = np.bincount(self.day_index, weights=den, minlength=self.n_days)
        top, bottom = self.counts @ day_num, self.counts @ day_den
        return np.divide(top, bottom, out=np.full(top.shape, np.nan), where=bottom > 0)


def half_width(values: np.ndarray) -> float:
    """Return half the 5-95 % range of resampled ``values``: the noise of a 90 %
    interval; inf when fewer than half of them are defined.

    Infinite noise means the rows cannot judge the figure (e.g. no task of the
    largest class): no check can fail on it.
    """
    finite = values[np.isfinite(values)]
    if finite.size < len(values) / 2:
        return float("inf")
    low, high = np.quantile(finite, [0.05, 0.95])
    return float(high - low) / 2
