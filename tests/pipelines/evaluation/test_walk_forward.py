"""The walk-forward driver: periods cut by a fixed or a self-chosen cadence."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.errors import UserInputError
from pipelines.evaluation.walk_forward import (
    UNTRAINED_RETRY_DAYS,
    check_cadence,
    period_end,
    walk_periods,
)


def days(*offsets: float) -> np.ndarray:
    start = np.datetime64("2024-01-30T00:00:00", "ns")
    return start + (np.asarray(offsets) * 86400e9).astype("timedelta64[ns]")


def test_a_fixed_cadence_ends_at_the_next_calendar_period():
    start = np.datetime64("2024-01-30T12:00:00", "ns")
    assert period_end(start, "month", 99) == np.datetime64("2024-02-01", "ns")
    assert period_end(start, "day", None) == np.datetime64("2024-01-31", "ns")


def test_auto_ends_after_the_chosen_days_or_the_retry_days():
    start = np.datetime64("2024-01-30T12:00:00", "ns")
    assert period_end(start, "auto", 3) == start + np.timedelta64(3 * 86400, "s")
    assert period_end(start, "auto", None) == start + np.timedelta64(
        UNTRAINED_RETRY_DAYS * 86400, "s"
    )


def test_an_unknown_cadence_is_refused():
    with pytest.raises(UserInputError, match="'cadence' field must be one of"):
        check_cadence("fortnight")


def test_each_period_is_retrained_at_its_first_task_and_ends_as_chosen():
    created = days(0, 0.5, 1, 2, 3.5, 4, 9)
    boundaries = []

    def retrain(start):
        boundaries.append(start)
        return len(boundaries), 2  # each retraining asks for 2 days

    periods = list(walk_periods(created, np.arange(1, 7)[::-1], "auto", retrain))
    assert [r for _, r in periods] == [1, 2, 3]
    assert [p.rows.tolist() for p, _ in periods] == [[1, 2, 3], [4, 5], [6]]
    assert (
        [p.start for p, _ in periods]
        == boundaries
        == [created[1], created[4], created[6]]
    )


def test_max_periods_stops_the_walk():
    created = days(0, 1, 2, 3)
    periods = list(
        walk_periods(created, np.arange(4), "day", lambda s: (None, None), 2)
    )
    assert [p.rows.tolist() for p, _ in periods] == [[0], [1]]
