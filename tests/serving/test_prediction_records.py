"""The records' parts that need no trained bundle: class rows and the GC pause."""

from __future__ import annotations

import gc

import pytest

from panda_predictor.bins_file import load_bins
from panda_predictor.serving.prediction_records import (
    _value_choice,
    class_rows,
    no_cyclic_gc,
)


def test_class_rows_give_open_ends_as_none_and_the_float_values():
    rows = class_rows(load_bins()["cputime"])
    assert [r[0] for r in rows] == ["tiny", "small", "medium", "large"]
    # Class 0 has no lower edge, the top class no upper one.
    assert rows[0][1] is None and rows[-1][2] is None
    assert rows[1][1:4] == (1.0, 10.0, 10.0)
    assert {r[4] for r in rows} == {"HS06sPerEvent"}


@pytest.mark.parametrize("enabled", [True, False])
def test_the_gc_pause_restores_the_collector_as_it_was(enabled):
    (gc.enable if enabled else gc.disable)()
    try:
        with no_cyclic_gc():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), no_cyclic_gc():
            raise RuntimeError("a batch that fails")
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_the_value_choice_names_the_request_or_the_cheapest_value():
    text = _value_choice(
        "class 2 by the model", 4000.0, "MBPerCore", 1.23456, 0.9, False
    )
    assert text == (
        "class 2 by the model; writes 4000 MBPerCore, the cheapest value "
        "(expected cost 1.235 job runs, enough with p=0.90)"
    )
    assert "the request" in _value_choice("why", 1.0, "s", 0.0, 1.0, True)
