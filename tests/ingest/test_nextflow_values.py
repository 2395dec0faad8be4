"""Nextflow's cell formats: sizes, durations and percentages, human or raw."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.ingest.files import JobLogError
from panda_predictor.ingest.nextflow_values import (
    Cells,
    durations,
    percents,
    sizes,
)


def cells(*values: str, field: str = "peak_rss") -> Cells:
    return Cells("trace.txt", field, list(values), np.arange(2, 2 + len(values)))


def test_human_sizes_are_bytes_and_missing_cells_nan():
    out = sizes(cells("1 KB", "1.5 MB", "2 GB", "-", "", "1 KB"))
    expected = [1024.0, 1.5 * 1024**2, 2 * 1024**3, np.nan, np.nan, 1024.0]
    np.testing.assert_array_equal(out, expected)


def test_raw_columns_are_already_in_their_unit():
    np.testing.assert_array_equal(sizes(cells("2048", "0")), [2048.0, 0.0])
    np.testing.assert_array_equal(durations(cells("1500", "-")), [1.5, np.nan])
    np.testing.assert_array_equal(percents(cells("87.5", "100")), [87.5, 100.0])


def test_durations_add_their_parts():
    out = durations(cells("1h 2m 3s", "2d", "150ms", field="realtime"))
    np.testing.assert_allclose(out, [3723.0, 172800.0, 0.15])


def test_percentages_may_carry_the_sign():
    np.testing.assert_array_equal(percents(cells("87.5%", "3")), [87.5, 3.0])


@pytest.mark.parametrize(
    "parse, values, match",
    [
        (sizes, ("1 KB", "lots"), r"'peak_rss' field must be .*Got 'lots' at line 3"),
        (sizes, ("5 parsecs",), "Got '5 parsecs' at line 2"),
        (durations, ("1h 2x",), "Got '1h 2x' at line 2"),
        (sizes, ("-3",), "Got '-3' at line 2"),
    ],
    ids=["word", "unknown-unit", "bad-duration", "negative"],
)
def test_a_bad_cell_names_its_field_value_and_line(parse, values, match):
    with pytest.raises(JobLogError, match=match):
        parse(cells(*values))


def test_texts_are_stripped_with_missing_as_none():
    assert cells(" a ", "-", "b").texts().tolist() == ["a", None, "b"]
