"""The job frame's shared pieces: the assumed wait, finish times, the time span."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from panda_predictor.ingest.files import JobLogError
from panda_predictor.ingest.frame import (
    ASSUMED_WAIT_S,
    check_assumed_wait,
    finish_times,
    string_categories,
    time_span,
)


def test_a_wait_is_a_finite_number_of_seconds():
    assert check_assumed_wait(0) == 0.0
    assert check_assumed_wait(ASSUMED_WAIT_S) == 3600.0


@pytest.mark.parametrize("value", [True, -1, math.inf, math.nan, "60", None], ids=repr)
def test_other_waits_are_refused(value):
    with pytest.raises(JobLogError, match=f"Got {value!r} instead"):
        check_assumed_wait(value)


def test_the_wait_is_assumed_only_where_the_log_did_not_record_it():
    nan = np.nan
    submit = np.array([0.0, 0.0, 0.0, 0.0])
    wait = np.array([10.0, nan, nan, nan])
    run = np.array([100.0, 100.0, 100.0, nan])
    not_recorded = np.array([False, True, False, True])

    finish, assumed = finish_times(submit, wait, run, not_recorded, 60.0)

    # recorded; assumed 60 s; set aside as impossible (unknown); no run time.
    np.testing.assert_array_equal(finish, [110.0, 160.0, nan, nan])
    assert assumed.tolist() == [False, True, False, False]


def test_the_span_is_first_and_last_submit_or_none():
    times = pd.Series(pd.to_datetime(["2025-03-02", "2025-01-05", None]))
    assert time_span(times) == (pd.Timestamp("2025-01-05"), pd.Timestamp("2025-03-02"))
    assert time_span(pd.Series([], dtype="datetime64[ns]")) == (None, None)
    assert time_span(pd.Series([pd.NaT, pd.NaT])) == (None, None)


def test_categories_are_strings_with_blanks_missing():
    categories = string_categories(pd.Series([7, "a", "", None, np.nan, 7]))
    assert list(categories.categories) == ["7", "a"]
    assert categories.isna().tolist() == [False, False, True, True, True, False]
