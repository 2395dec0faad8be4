"""The JEDI refiner plugin against PanDA's real GenTaskRefiner and JediTaskSpec.

PanDA's classes come from ``scripts/install-panda-classes.sh`` (run once by the
``panda_classes`` fixture when they are missing). The task buffer and work-queue
mapper are stand-ins answering the few calls ``extractCommon`` makes.
"""

from __future__ import annotations

import copy
import math
import warnings
from types import SimpleNamespace

import pytest
from panda_classes import ensure_panda_classes

from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.metrics import (
    FALLBACKS,
    KILL_SWITCH_ON,
    KILL_SWITCH_TASKS,
    TASKS,
)
from panda_predictor.plugins.prediction_client import PredictionUnavailable
from panda_predictor.settings import load_settings
from tests.test_db_support import audit_rows


def _import_refiners():
    with warnings.catch_warnings():
        # PanDA's own modules are not ours to fix (old escape sequences, ...).
        warnings.simplefilter("ignore")
        from pandajedi.jedirefine.GenTaskRefiner import GenTaskRefiner

        from panda_predictor.plugins import jedi_refiner
    return GenTaskRefiner, jedi_refiner


@pytest.fixture(scope="session")
def panda_classes():
    """Return (GenTaskRefiner, jedi_refiner module), installing PanDA's classes once."""
    ensure_panda_classes()
    return _import_refiners()


class StandInTaskBuffer:
    """Answers the task-buffer calls of TaskRefinerBase.extractCommon."""

    def get_site_mapper(self):
        return None

    def is_valid_share(self, name):
        return True

    def get_share_for_task(self, task_spec):
        return "MC Production"

    def get_resource_type_task(self, task_spec):
        return "MCORE" if (task_spec.coreCount or 1) > 1 else "SCORE"


class StandInWorkQueues:
    """Answers JEDI's work-queue mapper: one queue for every task."""

    def getQueueByName(self, vo, label, name):
        return None

    def getQueueWithSelParams(self, vo, label, **params):
        return SimpleNamespace(queue_id=17), ""


class FakeClient:
    """Our PredictionClient interface: returns a fixed prediction or raises."""

    def __init__(self, outcome):
        self.outcome = outcome
        self.definitions = []

    def predict(self, definition):
        self.definitions.append(dict(definition))
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def _target(name, value, unit, confidence=0.9):
    return TargetPrediction(
        name,
        1,
        "x",
        0.0,
        float(value),
        value,
        unit,
        confidence,
        (1 - confidence, confidence),
    )


def prediction(decision="applied", cputime=25):
    return TaskPrediction(
        jeditaskid=4242,
        model_name="panda-predictor",
        model_version="3",
        decision=decision,
        reason="confident" if decision == "applied" else "low confidence: ramcount",
        targets={
            "ramcount": _target("ramcount", 3000, "MBPerCore"),
            "cputime": _target("cputime", cputime, "HS06sPerEvent"),
            "iointensity": _target("iointensity", 500, "kBPerS"),
            "walltime": _target("walltime", 40, "kSI2kseconds"),
        },
    )


def param_map(**extra):
    base = {
        "taskName": "mc23_13p6TeV.801234.Py8EG_A14.simul.e8514_s4162",
        "userName": "atlas-prod",
        "vo": "atlas",
        "prodSourceLabel": "managed",
        "taskPriority": 500,
        "architecture": "x86_64-el9-gcc13-opt",
        "transUses": "Atlas-24.0.1",
        "transHome": "AthSimulation-24.0.1",
        "transPath": "Sim_tf.py",
        "processingType": "simul",
        "taskType": "prod",
        "coreCount": 8,
        "workingGroup": "AP_MCGN",
        "campaign": "MC23",
        "nEventsPerJob": 1000,
        "inDS": "mc23_13p6TeV.801234.evgen.EVNT.e8514",
        "jobParameters": [
            {"type": "template", "param_type": "input", "value": "--inputEVNT=${IN}"},
            {"type": "constant", "value": "--maxEvents=1000"},
        ],
        "log": {"dataset": "mc23.log", "type": "template", "param_type": "log"},
    }
    base.update(extra)
    return base


def refine(refiner_cls, task_map, *args, task_id=4242, **kwargs):
    """Run extractCommon on ``task_map`` and return the refiner."""
    refiner = refiner_cls(StandInTaskBuffer(), None, *args, **kwargs)
    refiner.extractCommon(task_id, task_map, StandInWorkQueues(), None)
    return refiner


def spec_values(refiner):
    """Return the task spec's attributes and what JEDI would write, minus the time."""
    values = refiner.taskSpec.valuesMap()
    changed = refiner.taskSpec.valuesMap(onlyChanged=True)
    for stamped in (values, changed):
        stamped.pop(":startTime")
    return values, changed


def counter(metric, *labels):
    return metric.labels(*labels)._value.get()


@pytest.fixture
def plain(panda_classes):
    """Return (map, refiner) as PanDA's GenTaskRefiner alone makes them."""
    gen, _ = panda_classes
    task_map = param_map()
    return task_map, refine(gen, task_map)


@pytest.fixture
def settings(tmp_path):
    return load_settings(home=tmp_path)


def test_confident_prediction_sets_fields_and_skips_scouts(
    panda_classes, plain, settings
):
    _, module = panda_classes
    plain_map, plain_refiner = plain
    before = counter(TASKS, "jedi", "applied")
    task_map = param_map()
    client = FakeClient(prediction())

    refiner = refine(module.PredictingGenTaskRefiner, task_map, client, settings)

    spec = refiner.taskSpec
    assert "US=2" in plain_refiner.taskSpec.splitRule
    assert "US=" not in spec.splitRule
    assert spec.useScout() is False
    assert (spec.ramCount, spec.ramUnit) == (3000, "MBPerCore")
    assert (spec.cpuTime, spec.cpuTimeUnit) == (25, "HS06sPerEvent")
    assert (spec.ioIntensity, spec.ioIntensityUnit) == (500, "kBPerS")
    assert (spec.walltime, spec.walltimeUnit) == (40, "kSI2kseconds")
    # The prediction is only in the task spec: the map JEDI saves as the task's
    # parameters (GenTaskRefiner's updatedTaskParams) has none of it, and lacks only
    # the default ramCount GenTaskRefiner adds when a map has none.
    assert refiner.updatedTaskParams is task_map
    assert "skipScout" not in task_map
    assert task_map == {
        key: value
        for key, value in plain_map.items()
        if key not in ("ramCount", "ramUnit")
    }
    assert counter(TASKS, "jedi", "applied") == before + 1
    # The models saw PanDA's map through taskdef: known keys, counts unknown.
    sent = client.definitions[0]
    assert sent["jediTaskID"] == 4242 and sent["transPath"] == "Sim_tf.py"
    assert "taskName" not in sent and "nEventsPerJob" not in sent


@pytest.mark.parametrize("cputime", [4.0, 2.3], ids=["whole", "fraction"])
def test_fixed_units_and_a_small_cputime(panda_classes, db, settings, cputime):
    """Memory takes the Fixed unit; cputime goes in whole HS06sPerEvent, never
    milli or Fixed, as the hook writes JEDI_TASKS: the refiner takes its values
    out of the saved parameters, and PanDA's re-measurement reads the previous
    cpuTimeUnit only there, so a later measurement of 10 or more would stay under
    an ``mHS06sPerEvent`` unit, read 1000x too small."""
    _, module = panda_classes
    settings = settings.model_copy(update={"fixed_units": True})
    task_map = param_map()
    refiner = refine(
        module.PredictingGenTaskRefiner,
        task_map,
        FakeClient(prediction(cputime=cputime)),
        settings,
        audit_bind=db,
    )
    spec = refiner.taskSpec
    assert (spec.ramCount, spec.ramUnit) == (3000, "MBPerCoreFixed")
    assert (spec.cpuTime, spec.cpuTimeUnit) == (math.ceil(cputime), "HS06sPerEvent")
    assert "cpuTimeUnit" not in task_map  # PanDA's re-measurement finds none
    audited = audit_rows(db, settings)[4242]
    assert (audited["cputime_value"], audited["cputime_unit"]) == (
        spec.cpuTime,
        spec.cpuTimeUnit,
    )


def test_requester_values_follow_pandas_scout_rules(panda_classes, settings):
    """Preset values are replaced as the scouts would; a larger walltime stays.

    The full table of cases, shared with the database hook, is in
    tests/core/domain/test_requested_values.py.
    """
    _, module = panda_classes
    task_map = param_map(ramCount=4000, ramUnit="MBPerCore", walltime=70)
    refiner = refine(
        module.PredictingGenTaskRefiner, task_map, FakeClient(prediction()), settings
    )
    spec = refiner.taskSpec
    assert (spec.ramCount, spec.ramUnit, spec.cpuTime) == (3000, "MBPerCore", 25)
    assert (spec.walltime, spec.walltimeUnit) == (70, None)
    assert "US=" not in spec.splitRule


class _Boom(RuntimeError):
    pass


FAILURES = [
    pytest.param(_Boom("model exploded"), "_Boom", id="raising-predictor"),
    pytest.param(
        PredictionUnavailable("no answer in 2 s", "timeout"), "timeout", id="timeout"
    ),
    pytest.param(
        PredictionUnavailable("registry down", "no_model"), "no_model", id="no-model"
    ),
    pytest.param("bad-prediction", "AttributeError", id="malformed-prediction"),
]


@pytest.mark.parametrize(("outcome", "reason"), FAILURES)
def test_failure_leaves_task_as_parent_makes_it(
    panda_classes, plain, settings, outcome, reason, caplog
):
    _, module = panda_classes
    plain_map, plain_refiner = plain
    before = counter(FALLBACKS, "jedi", reason)
    task_map = param_map()

    with caplog.at_level("WARNING", logger=module.__name__):
        refiner = refine(
            module.PredictingGenTaskRefiner, task_map, FakeClient(outcome), settings
        )

    assert task_map == plain_map
    assert spec_values(refiner) == spec_values(plain_refiner)
    assert "US=2" in refiner.taskSpec.splitRule
    assert counter(FALLBACKS, "jedi", reason) == before + 1
    assert "jediTaskID=4242" in caplog.text


def test_failure_after_filling_restores_the_map(
    panda_classes, plain, settings, monkeypatch
):
    _, module = panda_classes
    plain_map, plain_refiner = plain

    from panda_predictor.plugins import jedi_prediction

    def fill_then_fail(task_param_map, plan):
        task_param_map["skipScout"] = True
        task_param_map["ramCount"] = 1
        raise _Boom("half-way")

    monkeypatch.setattr(jedi_prediction, "fill", fill_then_fail)
    task_map = param_map()
    refiner = refine(
        module.PredictingGenTaskRefiner, task_map, FakeClient(prediction()), settings
    )
    assert task_map == plain_map
    assert spec_values(refiner) == spec_values(plain_refiner)


def test_kept_scouts_keeps_the_scout_rule(panda_classes, plain, settings):
    _, module = panda_classes
    plain_map, plain_refiner = plain
    before = counter(TASKS, "jedi", "kept_scouts")
    task_map = param_map()
    refiner = refine(
        module.PredictingGenTaskRefiner,
        task_map,
        FakeClient(prediction("kept_scouts")),
        settings,
    )
    assert "US=2" in refiner.taskSpec.splitRule
    assert task_map == plain_map
    assert spec_values(refiner) == spec_values(plain_refiner)
    assert counter(TASKS, "jedi", "kept_scouts") == before + 1


def test_kill_switch_predicts_nothing(panda_classes, plain, tmp_path):
    _, module = panda_classes
    plain_map, _ = plain
    switch = tmp_path / "legacy"
    switch.touch()
    settings = load_settings(home=tmp_path, kill_switch_file=switch)
    client = FakeClient(prediction())
    task_map = param_map()
    before = counter(KILL_SWITCH_TASKS, "jedi")
    refiner = refine(module.PredictingGenTaskRefiner, task_map, client, settings)
    assert client.definitions == []
    assert task_map == plain_map
    assert "US=2" in refiner.taskSpec.splitRule
    # The fault is counted: the task kept back and the switch seen on.
    assert counter(KILL_SWITCH_TASKS, "jedi") == before + 1
    assert counter(KILL_SWITCH_ON, "jedi") == 1.0


def test_task_that_already_skips_scouts_is_not_predicted(panda_classes, settings):
    _, module = panda_classes
    client = FakeClient(prediction())
    task_map = param_map(skipScout=True)
    refiner = refine(module.PredictingGenTaskRefiner, task_map, client, settings)
    assert client.definitions == []
    assert refiner.taskSpec.ramCount == 2000  # GenTaskRefiner's default


def test_parent_errors_still_propagate(panda_classes, settings):
    gen, module = panda_classes
    broken = param_map()
    del broken["userName"]
    with pytest.raises(KeyError, match="userName"):
        refine(gen, copy.deepcopy(broken))
    with pytest.raises(KeyError, match="userName"):
        refine(
            module.PredictingGenTaskRefiner, broken, FakeClient(prediction()), settings
        )


def _configuration(refiner):
    from panda_predictor.plugins import jedi_prediction

    return jedi_prediction._configuration(
        refiner._pp_options["client"], refiner._pp_options["settings"]
    )


def test_default_client_is_built_once_from_the_environment(
    panda_classes, monkeypatch, tmp_path
):
    _, module = panda_classes
    monkeypatch.setenv("PANDA_PREDICTOR_HOME", str(tmp_path))
    monkeypatch.setenv("PANDA_PREDICTOR_REFINER_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("PANDA_PREDICTOR_REFINER_TIMEOUT", "0.5")
    module.reset_shared_client()
    try:
        first = module.PredictingGenTaskRefiner(StandInTaskBuffer(), None)
        second = module.PredictingGenTaskRefiner(StandInTaskBuffer(), None)
        settings_a, client_a = _configuration(first)
        settings_b, client_b = _configuration(second)
        assert client_a is client_b
        assert client_a.url == "http://127.0.0.1:9/v1/predictions"
        assert client_a.timeout == 0.5
        assert settings_a.home == tmp_path
        # Nothing listens on port 9: the task keeps its scouts, JEDI goes on.
        task_map = param_map()
        first.extractCommon(77, task_map, StandInWorkQueues(), None)
        assert "US=2" in first.taskSpec.splitRule
        assert "skipScout" not in task_map
    finally:
        module.reset_shared_client()


def test_jedi_factory_loads_the_plugin_from_mod_config(
    panda_classes, plain, monkeypatch, tmp_path
):
    """JEDI's own plugin factory resolves the operator's modConfig line to our class."""
    import logging

    gen, module = panda_classes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pandajedi.jedicore.FactoryBase import FactoryBase

    mod_config = (
        "wlcg:managed:panda_predictor.plugins.jedi_refiner:PredictingGenTaskRefiner,"
        "wlcg:any:pandajedi.jedirefine.GenTaskRefiner:GenTaskRefiner"
    )
    factory = FactoryBase(
        ["wlcg"], ["managed", "user"], logging.getLogger("jedi-test"), mod_config
    )
    factory.initializeMods(StandInTaskBuffer(), None)
    managed = factory.instantiateImpl(
        "wlcg", "managed", "any", StandInTaskBuffer(), None
    )
    user = factory.getImpl("wlcg", "user")
    assert type(managed) is module.PredictingGenTaskRefiner.refiner_class()
    assert isinstance(managed, gen)
    assert type(user) is gen

    # Built by JEDI with no arguments of ours: the environment configures it.
    monkeypatch.setenv("PANDA_PREDICTOR_HOME", str(tmp_path))
    monkeypatch.setenv("PANDA_PREDICTOR_REFINER_URL", "http://127.0.0.1:9")
    module.reset_shared_client()
    try:
        task_map = param_map()
        managed.extractCommon(4242, task_map, StandInWorkQueues(), None)
    finally:
        module.reset_shared_client()
    plain_map, plain_refiner = plain
    assert task_map == plain_map
    assert spec_values(managed) == spec_values(plain_refiner)
