"""The terminal table shows values as PanDA stores them, not as floats."""

from __future__ import annotations

import dataclasses

from test_db_support import make_prediction

from panda_predictor.cli.render import predictions_frame, predictions_table
from panda_predictor.core.domain.units import database_value


def _with(prediction, target, value):
    targets = dict(prediction.targets)
    targets[target] = dataclasses.replace(targets[target], value=value)
    return dataclasses.replace(prediction, targets=targets)


def test_table_shows_the_stored_integer_and_unit():
    prediction = _with(
        make_prediction(7, cputime=9.325), "ramcount", 19361.999999999996
    )
    row = predictions_frame([prediction]).iloc[0]
    assert row["RAM"] == "19362 MBPerCore (0.90)"
    assert row["CPU"] == "9325 mHS06sPerEvent (0.80)"
    assert "19361.99" not in predictions_table([prediction])


def test_the_hooks_table_shows_what_the_database_path_writes():
    prediction = make_prediction(7, cputime=9.325)
    row = predictions_frame([prediction], convert=database_value).iloc[0]
    assert row["CPU"] == "10 HS06sPerEvent (0.80)"


def test_a_value_that_cannot_be_stored_is_shown_as_it_is():
    prediction = _with(make_prediction(8), "ramcount", float("nan"))
    assert predictions_frame([prediction]).iloc[0]["RAM"] == "nan MBPerCore (0.90)"
