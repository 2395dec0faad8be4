"""A matrix's columns by name: views, and NaN for a name the matrix lacks."""

from __future__ import annotations

import numpy as np

from panda_predictor.core.features.matrix_columns import MatrixColumns


def test_columns_are_read_by_name_and_missing_ones_are_nan():
    M = np.arange(6, dtype=np.float32).reshape(2, 3)
    columns = MatrixColumns(M, {"a": 0, "b": 1, "c": 2})
    assert list(columns) == ["a", "b", "c"] and len(columns) == 3
    assert "b" in columns and "z" not in columns
    np.testing.assert_array_equal(columns["c"], [2.0, 5.0])
    np.testing.assert_array_equal(columns.take(["c", "a"]), [[2.0, 0.0], [5.0, 3.0]])
    taken = columns.take(["a", "z"])
    assert taken.dtype == np.float64
    np.testing.assert_array_equal(taken[:, 0], [0.0, 3.0])
    assert np.isnan(taken[:, 1]).all()
