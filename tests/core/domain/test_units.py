"""The one conversion to PanDA's stored values, and float class values carried to it."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from test_db_support import add_task, make_prediction, task_row

from panda_predictor.core.bins import BinSet, TargetBins
from panda_predictor.core.decide.use_table import UseTable
from panda_predictor.core.domain.units import (
    cputime_to_panda,
    from_panda,
    is_fixed,
    prediction_to_panda,
    to_panda,
)
from panda_predictor.core.features.pipeline import TASK_COLUMNS
from panda_predictor.db.audit_writer import panda_value
from panda_predictor.db.writer import write_predictions
from panda_predictor.plugins.prediction_client import param_map_fields
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor


@pytest.mark.parametrize(
    ("value", "unit", "fixed", "expected"),
    [
        pytest.param(2.3, "HS06sPerEvent", False, (2300, "mHS06sPerEvent"), id="2.3"),
        pytest.param(0.8101, "HS06sPerEvent", False, (811, "mHS06sPerEvent"), id="up"),
        pytest.param(9.9999, "HS06sPerEvent", False, (10000, "mHS06sPerEvent"),
                     id="just-below-10"),
        pytest.param(10.0, "HS06sPerEvent", False, (10, "HS06sPerEvent"), id="10"),
        pytest.param(25.2, "HS06sPerEvent", True, (26, "HS06sPerEventFixed"),
                     id="fixed"),
        pytest.param(4.0, "HS06sPerEvent", True, (4000, "mHS06sPerEventFixed"),
                     id="milli-fixed"),
        pytest.param(1500.0000001, "MBPerCore", False, (1500, "MBPerCore"),
                     id="float-noise"),
        pytest.param(1500.4, "MBPerCore", True, (1501, "MBPerCoreFixed"),
                     id="ram-fixed"),
        pytest.param(499.5, "kBPerS", True, (500, "kBPerS"), id="io-never-fixed"),
        pytest.param(0.0, "kSI2kseconds", False, (0, "kSI2kseconds"), id="walltime-0"),
    ],
)  # fmt: skip
def test_to_panda(value, unit, fixed, expected):
    assert to_panda(value, unit, fixed) == expected
    stored, stored_unit = expected
    back, base = from_panda(stored, stored_unit)
    step = 0.001 if stored_unit.startswith("m") else 1.0
    assert base == unit and value - 1e-6 <= back < value + step  # rounded up once
    assert is_fixed(stored_unit) is stored_unit.endswith("Fixed")


def test_to_panda_refuses_nan():
    with pytest.raises(ValueError, match=r"'HS06sPerEvent' must be a finite .*nan"):
        to_panda(float("nan"), "HS06sPerEvent")


def test_column_conversion_is_the_scalar_one():
    values = np.array([0.8101, 2.3, 7.3, 9.9999, 10.0, 250.2, np.nan])
    stored, milli = cputime_to_panda(values)
    for value, got, is_milli in zip(values[:-1], stored[:-1], milli[:-1], strict=True):
        number, unit = to_panda(float(value), "HS06sPerEvent")
        assert (got, is_milli) == (number, unit == "mHS06sPerEvent")
    assert np.isnan(stored[-1]) and not milli[-1]


def test_every_writer_uses_the_one_conversion():
    prediction = make_prediction(1, cputime=2.3)
    target = prediction.targets["cputime"]
    expected = (2300, "mHS06sPerEvent")
    assert prediction_to_panda(target) == expected
    assert panda_value(target) == expected
    fields = param_map_fields(prediction)
    assert (fields["cpuTime"], fields["cpuTimeUnit"]) == expected
    bins = TargetBins("cputime", (1.0, 5.0), (0.9, 2.3, 12.0))
    assert bins.panda_value_of(1) == expected


def test_zero_cputime_class_falls_back_to_its_upper_edge():
    target = dataclasses.replace(
        make_prediction(1).targets["cputime"], value=0.0, upper=0.25
    )
    assert prediction_to_panda(target) == (250, "mHS06sPerEvent")


@pytest.fixture(scope="module")
def fractional_predictor(trained_bundle_dir) -> Predictor:
    """Return a predictor whose cputime classes have fitted fractional values.

    The cost choice picks among the class values, the use inside each class and
    the request; the use table is set on the class values too, so every candidate
    of a task without a cputime request is one of the fractional values.
    """
    bundle = load_bundle(trained_bundle_dir)
    cputime = bundle.bins["cputime"]
    values = tuple(2.3 + 0.1 * i for i in range(cputime.n_classes))
    fractional = dataclasses.replace(cputime, values=values)
    bins = BinSet(bundle.bins.version, {**bundle.bins.targets, "cputime": fractional})
    use = UseTable(tuple((v,) * 4 for v in values))
    fractional_bundle = dataclasses.replace(
        bundle, bins=bins, use_tables={**bundle.use_tables, "cputime": use}
    )
    return Predictor(fractional_bundle, "panda-predictor", "1")


def test_fractional_bins_are_carried_as_floats_and_written_exactly(
    fractional_predictor, labelled_history, db, settings
):
    tasks = labelled_history.history[list(TASK_COLUMNS)].head(40).reset_index(drop=True)
    n_classes = fractional_predictor.bundle.bins["cputime"].n_classes
    values = [2.3 + 0.1 * k for k in range(n_classes)]
    predictions = fractional_predictor.predict(tasks)
    table = fractional_predictor.predict_table(tasks)

    for prediction, written in zip(predictions, table["cputime_value"], strict=True):
        target = prediction.targets["cputime"]
        assert min(abs(target.value - v) for v in values) < 1e-9, target.value
        assert isinstance(target.value, float)
        stored, unit = panda_value(target)
        assert unit == "mHS06sPerEvent"
        assert stored == round(target.value * 1000)  # 2.3 -> 2300, never 3000
        assert written == pytest.approx(stored / 1000.0)

    first = dataclasses.replace(predictions[0], jeditaskid=1, decision="applied")
    # No preset: the far-from-preset rule would keep the scouts of a larger memory.
    add_task(db, settings, 1, splitrule="US=2", ramcount=None, ramunit=None)
    result = write_predictions(db, settings, [first])
    assert result.applied == [1], result.reasons
    row = task_row(db, settings, 1)
    # The database path writes no milli unit (task_effects.database_value): rounded
    # up once, 2.3 -> 3 HS06sPerEvent.
    expected = math.ceil(first.targets["cputime"].value)
    assert (row["cputime"], row["cputimeunit"]) == (expected, "HS06sPerEvent")


@pytest.mark.parametrize(
    ("unit", "fixed", "stored_unit"),
    [
        ("MBPerCoreFixed", None, "MBPerCoreFixed"),  # the decision's choice stands
        ("MBPerCore", None, "MBPerCore"),
        ("MBPerCoreFixed", False, "MBPerCore"),  # the setting says never
        ("MBPerCore", True, "MBPerCoreFixed"),  # the setting says always
        ("MBPerCoreFixed", True, "MBPerCoreFixed"),  # never fixed twice
    ],
)
def test_the_fixed_units_setting_overrides_the_unit_the_decision_chose(
    unit, fixed, stored_unit
):
    assert to_panda(1500.4, unit, fixed) == (1501, stored_unit)


@pytest.mark.parametrize(
    ("fixed_units", "stored_unit"),
    [(None, "MBPerCoreFixed"), (False, "MBPerCore"), (True, "MBPerCoreFixed")],
)
def test_the_database_writes_the_fixed_unit_the_decision_chose(
    db, settings, fixed_units, stored_unit
):
    prediction = make_prediction(7)
    ram = dataclasses.replace(prediction.targets["ramcount"], unit="MBPerCoreFixed")
    prediction = dataclasses.replace(
        prediction, targets={**prediction.targets, "ramcount": ram}
    )
    add_task(db, settings, 7, splitrule="US=2", ramcount=None, ramunit=None)
    result = write_predictions(db, settings, [prediction], fixed_units)
    assert result.applied == [7], result.reasons
    row = task_row(db, settings, 7)
    assert (row["ramcount"], row["ramunit"]) == (3000, stored_unit)
    # cputime is never written Fixed on the database path (database_value).
    assert row["cputimeunit"] == "HS06sPerEvent"
