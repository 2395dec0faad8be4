"""How the use is spread inside each class: fitted, stored and checked."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core.bins import TargetBins
from panda_predictor.core.decide.use_table import UseTable


def test_use_tables_fit_round_trip_and_fall_back_to_the_bins():
    bins = TargetBins("walltime", (100.0,), (90.0, 500.0))
    values = np.array([10.0, 20.0, 30.0, 200.0])
    table = UseTable.fit(values, bins.assign(values), bins, n_points=2)
    assert table.array.tolist() == [[15.0, 25.0], [200.0, 200.0]]
    assert UseTable.from_dict(table.to_dict()) == table
    empty = UseTable.fit(values[:3], bins.assign(values[:3]), bins, n_points=2)
    assert empty.array[1].tolist() == UseTable.from_bins(bins, 2).array[1].tolist()


@pytest.mark.parametrize(
    "points", [((2.0, 1.0),), ((np.nan,),), ()], ids=["descending", "nan", "empty"]
)
def test_a_bad_table_is_refused(points):
    with pytest.raises(ValueError, match="The 'points' field"):
        UseTable(points)
