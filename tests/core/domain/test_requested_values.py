"""The requester's preset values, as PanDA's scouts treat them, in hook and refiner.

One table of cases runs through the pure rule, the database hook (SQLite and
PostgreSQL) and the JEDI refiner on PanDA's own GenTaskRefiner, so the two paths
cannot disagree again (task 1001: 2000 MBPerCore lowered by one path, kept by the
other).
"""

from __future__ import annotations

import dataclasses

import pytest
from test_db_support import add_task, audit_rows, task_row

from panda_predictor.core.domain.requested_values import (
    FAR_FROM_REQUEST,
    NEVER_BELOW_PRESET,
    RAM_EXHAUSTED_MB,
    WRONG_CPUTIME_FACTOR,
    Requested,
    plan_write,
    preset_note,
    requested_values,
)
from panda_predictor.hook.submit import SubmitHook
from panda_predictor.plugins.prediction_client import REQUESTED_KEYS
from panda_predictor.settings import load_settings
from tests.plugins.test_jedi_refiner import (  # noqa: F401  (panda_classes is a fixture)
    FakeClient,
    _target,
    panda_classes,
    param_map,
    prediction,
    refine,
)

#: What the fake model predicts unless a case says otherwise.
PREDICTED = {"ramcount": 3000, "cputime": 25, "walltime": 40}
WRITTEN = {
    "ramcount": (3000, "MBPerCore"),
    "cputime": (25, "HS06sPerEvent"),
    "walltime": 40,
}
FAR = "far"

#: id -> (requested in the parameter map's names, predicted overrides, expected).
CASES = {
    "nothing-requested": ({}, {}, WRITTEN),
    "preset-replaced-as-scouts-do": (
        {"ramCount": 2000, "ramUnit": "MBPerCore"},
        {},
        WRITTEN,
    ),
    "lower-prediction-replaces-preset": (
        {"ramCount": 2000, "ramUnit": "MBPerCore"},
        {"ramcount": 1500},
        {**WRITTEN, "ramcount": (1500, "MBPerCore")},
    ),
    "fixed-ramcount-kept": (
        {"ramCount": 2000, "ramUnit": "MBPerCoreFixed"},
        {"ramcount": 1500},
        {**WRITTEN, "ramcount": (2000, "MBPerCoreFixed")},
    ),
    "fixed-milli-cputime-kept": (
        {"cpuTime": 4000, "cpuTimeUnit": "mHS06sPerEventFixed"},
        {},
        {**WRITTEN, "cputime": (4000, "mHS06sPerEventFixed")},
    ),
    "larger-walltime-kept": ({"walltime": 90}, {}, {**WRITTEN, "walltime": 90}),
    "zero-walltime-not-written": ({}, {"walltime": 0}, {**WRITTEN, "walltime": None}),
    "cputime-near-preset": (
        {"cpuTime": 20, "cpuTimeUnit": "HS06sPerEvent"},
        {},
        WRITTEN,
    ),
    "cputime-far-from-preset": (
        {"cpuTime": 10, "cpuTimeUnit": "HS06sPerEvent"},
        {},
        FAR,
    ),
    "milli-cputime-far-from-preset": (
        {"cpuTime": 5000, "cpuTimeUnit": "mHS06sPerEvent"},
        {},
        FAR,
    ),
    "ramcount-crosses-exhausted-line": (
        {"ramCount": 2000, "ramUnit": "MBPerCore"},
        {"ramcount": 5000},
        FAR,
    ),
    "ramcount-both-above-line": (
        {"ramCount": 4500, "ramUnit": "MBPerCore"},
        {"ramcount": 6000},
        {**WRITTEN, "ramcount": (6000, "MBPerCore")},
    ),
}
CASE_PARAMS = [pytest.param(*case, id=name) for name, case in CASES.items()]
#: Parameter-map name -> JEDI_TASKS column.
COLUMNS = {
    "ramCount": "ramcount",
    "ramUnit": "ramunit",
    "cpuTime": "cputime",
    "cpuTimeUnit": "cputimeunit",
    "walltime": "walltime",
}


def predicted(overrides, task_id=4242):
    """Return the fake model's applied prediction with some values changed."""
    base = prediction()
    targets = dict(base.targets)
    units = {"ramcount": "MBPerCore", "cputime": "HS06sPerEvent"}
    for name, value in overrides.items():
        targets[name] = _target(name, value, units.get(name, "kSI2kseconds"))
    return dataclasses.replace(base, jeditaskid=task_id, targets=targets)


@pytest.mark.parametrize(("requested", "overrides", "expected"), CASE_PARAMS)
def test_pure_rule(requested, overrides, expected):
    plan = plan_write(predicted(overrides), requested_values(requested, REQUESTED_KEYS))
    if expected == FAR:
        assert plan.far is not None and plan.far.startswith(FAR_FROM_REQUEST)
        return
    assert plan.far is None
    final = {
        "ramcount": plan.values.get(
            "ramcount", (requested.get("ramCount"), requested.get("ramUnit"))
        ),
        "cputime": plan.values.get(
            "cputime", (requested.get("cpuTime"), requested.get("cpuTimeUnit"))
        ),
        "walltime": plan.values.get("walltime", (requested.get("walltime"),))[0],
    }
    assert final == expected
    assert set(plan.kept) | set(plan.values) == set(PREDICTED) | {"iointensity"}


class FakePredictor:
    """Our Predictor interface: the same applied prediction for every task."""

    model_name, model_version = "panda-predictor", "3"

    def __init__(self, overrides):
        self.overrides = overrides

    def predict(self, tasks, history=None):
        return [predicted(self.overrides, int(t)) for t in tasks["jeditaskid"]]


@pytest.mark.parametrize(("requested", "overrides", "expected"), CASE_PARAMS)
def test_database_hook(db, settings, requested, overrides, expected):
    columns = {"ramcount": None, "ramunit": None, "cputime": None, "cputimeunit": None}
    columns.update({COLUMNS[k]: v for k, v in requested.items()})
    add_task(db, settings, 1, splitrule="TI=1,US=2", **columns)
    before = task_row(db, settings, 1)
    hook = SubmitHook(
        settings,
        engine=db,
        predictor_factory=lambda: FakePredictor(overrides),
        history_factory=lambda: None,
    )

    report = hook.run_once(task_ids=[1])

    assert report.failure is None
    row = task_row(db, settings, 1)
    if expected == FAR:
        assert report.kept_scouts == [1] and row == before
        assert audit_rows(db, settings)[1]["reason"].startswith(FAR_FROM_REQUEST)
        return
    assert report.applied == [1] and row["splitrule"] == "TI=1"
    assert (row["ramcount"], row["ramunit"]) == expected["ramcount"]
    assert (row["cputime"], row["cputimeunit"]) == expected["cputime"]
    assert row["walltime"] == expected["walltime"]


@pytest.mark.parametrize(("requested", "overrides", "expected"), CASE_PARAMS)
def test_jedi_refiner(panda_classes, tmp_path, requested, overrides, expected):  # noqa: F811
    gen, module = panda_classes
    settings = load_settings(home=tmp_path)
    task_map = param_map(**requested)
    plain_map = param_map(**requested)
    plain = refine(gen, plain_map).taskSpec

    refiner = refine(
        module.PredictingGenTaskRefiner,
        task_map,
        FakeClient(predicted(overrides)),
        settings,
    )

    spec = refiner.taskSpec
    if expected == FAR:
        # Exactly as PanDA alone refines it: the scouts run.
        assert spec.useScout() is True and task_map == plain_map
        assert (spec.ramCount, spec.cpuTime) == (plain.ramCount, plain.cpuTime)
        return
    assert spec.useScout() is False
    assert (spec.ramCount, spec.ramUnit) == expected["ramcount"]
    assert (spec.cpuTime, spec.cpuTimeUnit) == expected["cputime"]
    # Not written: what PanDA's refiner stores without us (0 for none given).
    assert spec.walltime == (expected["walltime"] or plain.walltime)


#: Cases of ``never_below_preset: true``: (requested, predicted overrides, written,
#: the start of the audit's note or None).
FLOOR_CASES = {
    "lower-ramcount-keeps-preset": (
        {"ramCount": 2000, "ramUnit": "MBPerCore"},
        {"ramcount": 1500},
        {**WRITTEN, "ramcount": (2000, "MBPerCore")},
        "never_below_preset: ramcount predicted 1500 MBPerCore is below the "
        "requested 2000 MBPerCore, the requested value stays",
    ),
    "lower-milli-cputime-keeps-preset": (
        {"cpuTime": 20, "cpuTimeUnit": "HS06sPerEvent"},
        {"cputime": 9},
        {**WRITTEN, "cputime": (20, "HS06sPerEvent")},
        "never_below_preset: cputime predicted 9000 mHS06sPerEvent is below the "
        "requested 20 HS06sPerEvent",
    ),
    "higher-prediction-written": (
        {"ramCount": 2000, "ramUnit": "MBPerCore"},
        {},
        WRITTEN,
        None,
    ),
}
FLOOR_PARAMS = [pytest.param(*case, id=name) for name, case in FLOOR_CASES.items()]


@pytest.mark.parametrize(("requested", "overrides", "expected", "note"), FLOOR_PARAMS)
def test_never_below_preset_pure_rule(requested, overrides, expected, note):
    preset = requested_values(requested, REQUESTED_KEYS)
    plan = plan_write(predicted(overrides), preset, never_below_preset=True)

    assert plan.far is None
    for name in ("ramcount", "cputime"):
        kept = (preset[name].value, preset[name].unit)
        assert plan.values.get(name, kept) == expected[name]
    assert (preset_note(plan) or "").startswith(note or "")
    assert (preset_note(plan) is None) == (note is None)
    # Off (the default), the prediction replaces the preset as the scouts' does.
    default = plan_write(predicted(overrides), preset)
    assert preset_note(default) is None and {"ramcount", "cputime"} <= set(
        default.values
    )


@pytest.mark.parametrize(("requested", "overrides", "expected", "note"), FLOOR_PARAMS)
def test_never_below_preset_database_hook(
    db, settings, requested, overrides, expected, note
):
    columns = {"ramcount": None, "ramunit": None, "cputime": None, "cputimeunit": None}
    columns.update({COLUMNS[k]: v for k, v in requested.items()})
    add_task(db, settings, 1, splitrule="TI=1,US=2", **columns)
    settings = settings.model_copy(update={"never_below_preset": True})
    hook = SubmitHook(
        settings,
        engine=db,
        predictor_factory=lambda: FakePredictor(overrides),
        history_factory=lambda: None,
    )

    report = hook.run_once(task_ids=[1])

    assert report.failure is None and report.applied == [1]
    row = task_row(db, settings, 1)
    assert row["splitrule"] == "TI=1"  # the task still skips its scouts
    assert (row["ramcount"], row["ramunit"]) == expected["ramcount"]
    assert (row["cputime"], row["cputimeunit"]) == expected["cputime"]
    reason = audit_rows(db, settings)[1]["reason"]
    if note is None:
        assert NEVER_BELOW_PRESET not in reason
    else:
        # The database path writes cputime without the milli unit (database_value).
        note = note.replace("9000 mHS06sPerEvent", "9 HS06sPerEvent")
        assert reason.startswith("confident; " + note)


@pytest.mark.parametrize(("requested", "overrides", "expected", "note"), FLOOR_PARAMS)
def test_never_below_preset_jedi_refiner(
    panda_classes,  # noqa: F811
    tmp_path,
    requested,
    overrides,
    expected,
    note,
):
    _, module = panda_classes
    settings = load_settings(home=tmp_path, never_below_preset=True)

    refiner = refine(
        module.PredictingGenTaskRefiner,
        param_map(**requested),
        FakeClient(predicted(overrides)),
        settings,
    )

    spec = refiner.taskSpec
    assert spec.useScout() is False
    assert (spec.ramCount, spec.ramUnit) == expected["ramcount"]
    assert (spec.cpuTime, spec.cpuTimeUnit) == expected["cputime"]


def test_thresholds_are_pandas_defaults():
    assert WRONG_CPUTIME_FACTOR == 2.0  # SCOUT_WRONG_CPUTIME_THRESHOLD
    assert RAM_EXHAUSTED_MB == 4000.0  # RAM_THR_EXAUSTED (4) x 1000
    assert Requested(0, "MBPerCore").given is False
