"""The one walk-forward driver: retrain before each period, then test the period.

Production retrains on what it knows and then serves the tasks that come until the
next retraining. An honest figure replays that loop over a history's newest part:
before each period, retrain on the tasks known at its first submission; then
predict the period's tasks. The period ends at the next calendar month, week or day
(a fixed cadence), or, with ``"auto"``, after the number of days the retraining
itself chose (:func:`pipelines.training.self_tuning.choose_cadence`).

Two data sources walk with this driver, each with its own retraining and scoring:
the labelled history of the database, month by month
(:mod:`pipelines.evaluation.monthly_walk`), and a real job log
(:mod:`pipelines.evaluation.trace.log_walk`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd

from panda_predictor.errors import UserInputError

#: Fixed retraining cadences of the walk forward and their pandas period codes;
#: ``"auto"`` retrains after the number of days each retraining chose.
CADENCES = {"month": "M", "week": "W", "day": "D"}
AUTO_CADENCE = "auto"
#: Days until the next retraining where a period had too little history to train.
UNTRAINED_RETRY_DAYS = 7

Retrained = TypeVar("Retrained")


@dataclass(frozen=True)
class Period:
    """One step of the walk: the test rows served between two retrainings.

    ``start`` is the creation of the period's first test task (the retraining saw
    only what was known before it); ``rows`` are the period's test rows, sorted.
    """

    start: np.datetime64
    rows: np.ndarray


def check_cadence(cadence: str) -> str:
    """Return ``cadence`` if it is ``"auto"`` or one of :data:`CADENCES`."""
    if cadence != AUTO_CADENCE and cadence not in CADENCES:
        raise UserInputError(
            f"The 'cadence' field must be one of {sorted(CADENCES) + [AUTO_CADENCE]}. "
            f"Got {cadence!r} instead."
        )
    return cadence


def period_end(
    start: np.datetime64, cadence: str, chosen_days: int | None
) -> np.datetime64:
    """Return when the period starting at ``start`` ends (the next retraining).

    A fixed cadence ends at the next calendar month, week or day; ``"auto"`` ends
    ``chosen_days`` after ``start``, the cadence its retraining chose.
    """
    if cadence == AUTO_CADENCE:
        days = chosen_days if chosen_days is not None else UNTRAINED_RETRY_DAYS
        return start + np.timedelta64(int(days * 86400), "s")
    period = pd.Timestamp(start).to_period(CADENCES[check_cadence(cadence)])
    return np.datetime64((period + 1).start_time.to_datetime64(), "ns")


def walk_periods(
    created: np.ndarray,
    test_rows: np.ndarray,
    cadence: str,
    retrain: Callable[[np.datetime64], tuple[Retrained, int | None]],
    max_periods: int | None = None,
) -> Iterator[tuple[Period, Retrained]]:
    """Retrain before each period of ``test_rows``; yield the period and the retraining.

    :param created: (n,) datetime64 creation of every row of the history.
    :param test_rows: the rows to test (positions into ``created``), in any order.
    :param cadence: ``"auto"`` or one of :data:`CADENCES`.
    :param retrain: called with a period's start before the period is cut; returns
        what the source keeps of its retraining and the days until the next one
        that retraining chose (``None``: none, or a fixed cadence).
    :param max_periods: stop after this many periods (``None``: walk to the end).
    """
    test_rows = test_rows[np.argsort(created[test_rows], kind="stable")]
    test_created = created[test_rows]
    first = n_periods = 0
    while first < test_rows.size:
        if max_periods is not None and n_periods >= max_periods:
            break
        start = test_created[first]
        retrained, chosen_days = retrain(start)
        end = period_end(start, cadence, chosen_days)
        last = max(int(np.searchsorted(test_created, end, side="left")), first + 1)
        yield Period(start, np.sort(test_rows[first:last])), retrained
        first, n_periods = last, n_periods + 1
