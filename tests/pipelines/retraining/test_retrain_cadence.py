"""When ``retrain --cadence auto`` trains: the registry's tags against the clock."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

import pytest

from pipelines.retraining.cadence import (
    DATA_UNTIL_TAG,
    EVERY_DAYS_TAG,
    cadence_tags,
    due_from_versions,
)
from pipelines.retraining.retrain import (
    MONTHLY,
    RetrainConfig,
    day_window,
    retrain_window,
)


def _version(number, until=None, every=None):
    tags = {}
    if until is not None:
        tags.update(cadence_tags(every, until))
    return SimpleNamespace(version=str(number), tags=tags)


def test_tags_round_trip_the_choice():
    tags = cadence_tags(30, datetime(2026, 3, 1))
    assert tags == {DATA_UNTIL_TAG: "2026-03-01T00:00:00", EVERY_DAYS_TAG: "30"}
    assert cadence_tags(None, datetime(2026, 3, 1)) == {
        DATA_UNTIL_TAG: "2026-03-01T00:00:00"
    }


def test_nothing_recorded_means_due():
    check = due_from_versions([_version(1)], None, datetime(2026, 1, 1))
    assert check.due and "records its training data's end" in check.reason
    assert due_from_versions([], None, datetime(2026, 1, 1)).due


def test_the_champions_cadence_counts_from_the_newest_trained_data():
    champion = _version(1, datetime(2026, 1, 1), every=91)
    refused = _version(2, datetime(2026, 2, 1), every=7)
    versions = [champion, refused]
    # The refused challenger was trained on data up to February: 91 days from there.
    check = due_from_versions(versions, 1, datetime(2026, 4, 1))
    assert not check.due
    assert check.next_due == datetime(2026, 5, 3)
    assert "not due until 2026-05-03" in check.reason
    assert "champion version 1 chose a 91-day cadence" in check.reason
    assert due_from_versions(versions, 1, datetime(2026, 5, 3)).due


def test_without_a_champion_the_newest_version_gives_the_cadence():
    versions = [
        _version(1, datetime(2026, 1, 1), 91),
        _version(2, datetime(2026, 1, 1), 7),
    ]
    assert due_from_versions(versions, None, datetime(2026, 1, 8)).due
    assert not due_from_versions(versions, None, datetime(2026, 1, 7)).due


def test_a_champion_without_a_cadence_is_due():
    check = due_from_versions(
        [_version(4, datetime(2026, 1, 1))], 4, datetime(2026, 1, 2)
    )
    assert check.due and "version 4 records no cadence" in check.reason


@pytest.mark.parametrize(
    ("now", "months", "window"),
    [
        (
            datetime(2026, 7, 10, 2, 30),
            12,
            (datetime(2025, 7, 10), datetime(2026, 7, 10)),
        ),
        (
            datetime(2026, 3, 31, 23, 0),
            1,
            (datetime(2026, 2, 28), datetime(2026, 3, 31)),
        ),
        (datetime(2024, 1, 15), 2, (datetime(2023, 11, 15), datetime(2024, 1, 15))),
    ],
    ids=["a-year", "short-month", "across-new-year"],
)
def test_the_auto_window_ends_at_the_start_of_the_day(now, months, window):
    assert day_window(now, months) == window
    assert retrain_window(now, RetrainConfig(window_months=months)) == window


def test_the_monthly_window_ends_at_the_start_of_the_month():
    config = RetrainConfig(window_months=12, cadence=MONTHLY)
    assert retrain_window(datetime(2026, 7, 10), config) == (
        datetime(2025, 7, 1),
        datetime(2026, 7, 1),
    )
