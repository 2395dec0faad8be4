"""The refiner plugin wraps PanDA's real refiners and changes only what it sets.

Each task runs through JEDI's own sequence (``TaskRefinerThread.runImpl``):
construction, ``initializeRefiner``, ``extractCommon``, ``doRefine``, once with PanDA's
refiner alone and once with ours wrapping it, and everything JEDI then registers is
compared: the task spec's attributes, the parameter map, ``updatedTaskParams`` as JEDI
encodes it for ``JEDI_TaskParams``, the dataset specs, the output templates and the
job parameter template. Real: PanDA's AtlasProdTaskRefiner, AtlasAnalTaskRefiner,
GenTaskRefiner, TaskRefinerBase, JediTaskSpec, JediDatasetSpec, FactoryBase and
RefinerUtils. Stand-ins: the task buffer (config values unset, no super users, one
share), the work-queue mapper and the DDM (every dataset exists, no replicas known),
which would need JEDI's database and Rucio.
"""

from __future__ import annotations

import copy
import logging
import random
import subprocess
import sys
import warnings

import pytest

from panda_predictor.metrics import FALLBACKS
from panda_predictor.plugins.jedi_refiner import wrapping
from panda_predictor.settings import load_settings
from tests.plugins import test_jedi_refiner as refiner_tests
from tests.plugins.test_jedi_refiner import (
    FakeClient,
    StandInTaskBuffer,
    StandInWorkQueues,
    _Boom,
    counter,
    param_map,
    prediction,
)

#: PanDA's classes, installed once per session (the refiner tests' fixture).
panda_classes = refiner_tests.panda_classes

TASK_ID = 4242


@pytest.fixture
def settings(tmp_path):
    """Settings of a plugin with no audit database at hand (audits: other tests)."""
    return load_settings(home=tmp_path)


#: The task spec fields the prediction sets (splitRule: only its US= token goes).
PREDICTED_FIELDS = {
    "ramCount",
    "ramUnit",
    "cpuTime",
    "cpuTimeUnit",
    "ioIntensity",
    "ioIntensityUnit",
    "walltime",
    "walltimeUnit",
    "splitRule",
}


class JediTaskBuffer(StandInTaskBuffer):
    """Also answers the calls of PanDA's ATLAS refiners: no config value is set."""

    def getConfigValue(self, component, key, app="jedi", vo=None, default=None):
        return default

    def isSuperUser(self, user_name):
        return False, False

    def getUserJobsetID_JEDI(self, user_name):
        return True, 77


class StandInRucio:
    """Every dataset exists as itself; no replica is known."""

    def expandContainer(self, name):
        return [name]

    def listDatasets(self, name):
        return [name]

    def listDatasetReplicas(self, name):
        return {}

    def check_endpoint(self, endpoint):
        return True, ""


class StandInDDM:
    def getInterface(self, vo, cloud=None):
        return StandInRucio()


def _refiners(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = __import__(f"pandajedi.jedirefine.{name}", fromlist=[name])
    return getattr(module, name)


def with_datasets(task, scope):
    """Give ``task`` an input, an output and a log dataset, as real definitions do."""
    task["jobParameters"] = [
        {
            "type": "template",
            "param_type": "input",
            "value": "--inputEVNTFile=${IN}",
            "dataset": f"{scope}.801234.evgen.EVNT.e8514_tid01/",
        },
        {
            "type": "template",
            "param_type": "output",
            "value": "--outputHITSFile=HITS.${SN}._${SN/P}.pool.root",
            "dataset": f"{scope}.801234.simul.HITS.e8514_s4162_tid02",
        },
        {"type": "constant", "value": "--maxEvents=1000"},
    ]
    task["log"] = {
        "type": "template",
        "param_type": "log",
        "value": "log.${SN}._${SN/P}.job.log.tgz",
        "dataset": f"{scope}.801234.simul.log.e8514_s4162_tid02",
    }
    return task


def production_task():
    """A production task with the requester's presets (ramCount, walltime)."""
    task = param_map(ramCount=4000, ramUnit="MBPerCore", walltime=10, cpuTime=30)
    return with_datasets(task, "mc23_13p6TeV")


def analysis_task():
    """A user analysis task as prun makes it (no transPath: the refiner sets it)."""
    task = param_map(
        taskName="user.jdoe.test.run1/",
        userName="jdoe",
        prodSourceLabel="user",
        taskType="anal",
        processingType="panda-client-1.5.0-jedi-run",
        transHome=None,
        workingGroup=None,
        coreCount=1,
        official=True,
    )
    del task["transPath"]
    del task["campaign"]
    return with_datasets(task, "user.jdoe")


def scoutless_task():
    """A production task whose definition already skips its scouts."""
    task = param_map(skipScout=True, ramCount=2500, ramUnit="MBPerCore")
    return with_datasets(task, "mc23_13p6TeV")


def run_like_jedi(factory, task_map, label="managed", **ours):
    """Refine ``task_map`` as JEDI's TaskRefinerThread does; return the refiner."""
    random.seed(11)  # PanDA's refiners draw for a few options
    refiner = factory(JediTaskBuffer(), StandInDDM(), **ours)
    refiner.vo, refiner.prodSourceLabel = "atlas", label
    refiner.initializeRefiner(logging.getLogger("jedi-test"))
    refiner.oldTaskStatus = "registered"
    refiner.extractCommon(TASK_ID, task_map, StandInWorkQueues(), None)
    refiner.doRefine(TASK_ID, task_map)
    return refiner


def registered(refiner, task_map):
    """Return what JEDI registers from a refiner, without the time stamp."""
    from pandajedi.jedirefine import RefinerUtils

    spec = refiner.taskSpec.valuesMap()
    spec.pop(":startTime")
    params = refiner.updatedTaskParams
    return {
        "spec": {key.lstrip(":"): value for key, value in spec.items()},
        "map": copy.deepcopy(task_map),
        "task_params": None if params is None else RefinerUtils.encodeJSON(params),
        "datasets": {
            kind: [ds.valuesMap() for ds in getattr(refiner, kind)]
            for kind in (
                "inMasterDatasetSpec",
                "inSecDatasetSpecList",
                "outDatasetSpecList",
                "in_content_dataset_specs",
            )
        },
        "unmerge": (
            {k: v.valuesMap() for k, v in refiner.unmergeMasterDatasetSpec.items()},
            {k: v.valuesMap() for k, v in refiner.unmergeDatasetSpecMap.items()},
        ),
        "templates": (refiner.outputTemplateMap, refiner.jobParamsTemplate),
    }


def without_scout_rule(split_rule):
    return ",".join(r for r in split_rule.split(",") if not r.startswith("US="))


TASKS = [
    pytest.param("AtlasProdTaskRefiner", production_task, "managed", id="prod-presets"),
    pytest.param("GenTaskRefiner", production_task, "managed", id="prod-presets-gen"),
    pytest.param("AtlasAnalTaskRefiner", analysis_task, "user", id="analysis"),
]


@pytest.mark.parametrize(("wrapped", "task", "label"), TASKS)
def test_wrapped_refiner_output_is_unchanged_but_for_the_predicted_fields(
    panda_classes, settings, wrapped, task, label
):
    _, module = panda_classes
    plain_map, our_map = task(), task()
    plain = registered(run_like_jedi(_refiners(wrapped), plain_map, label), plain_map)
    refiner = run_like_jedi(
        getattr(module, f"Predicting{wrapped}"),
        our_map,
        label,
        client=FakeClient(prediction()),
        settings=settings,
    )
    ours = registered(refiner, our_map)

    assert isinstance(refiner, _refiners(wrapped))
    assert type(refiner).__name__ == f"Predicting{wrapped}"
    assert refiner.taskSpec.useScout() is False
    changed = {k for k in plain["spec"] if plain["spec"][k] != ours["spec"][k]}
    assert changed <= PREDICTED_FIELDS and "ramCount" in changed
    assert without_scout_rule(plain["spec"]["splitRule"]) == ours["spec"]["splitRule"]
    assert (ours["spec"]["walltime"], ours["spec"]["walltimeUnit"]) == (
        40,
        "kSI2kseconds",
    )
    for part in ("datasets", "unmerge", "templates"):
        assert ours[part] == plain[part], part
    # The map (and so what JEDI saves as the task's parameters) has no prediction:
    # the requester's presets are back; only defaults the wrapped refiner adds to a
    # map without them are missing where ours stood in their place.
    defaults = {"ramCount", "ramUnit", "cpuTimeUnit"} - set(task())
    assert {k: v for k, v in plain_map.items() if k not in defaults} == our_map
    assert "skipScout" not in our_map
    if plain["task_params"] is None:
        assert ours["task_params"] is None  # AtlasProdTaskRefiner saves none
    else:
        assert refiner.updatedTaskParams is our_map
        assert '"skipScout"' not in ours["task_params"]


def test_analysis_task_not_official_keeps_its_scouts(panda_classes, settings, caplog):
    """AtlasAnalTaskRefiner drops skipScout of a task that is not "official"."""
    _, module = panda_classes
    task_map = analysis_task()
    del task_map["official"]
    with caplog.at_level("WARNING", logger=module.__name__):
        refiner = run_like_jedi(
            module.PredictingAtlasAnalTaskRefiner,
            task_map,
            "user",
            client=FakeClient(prediction()),
            settings=settings,
        )
    assert refiner.taskSpec.useScout() is True
    assert f"jediTaskID={TASK_ID} PredictingAtlasAnalTaskRefiner kept" in caplog.text


def test_task_that_already_skips_scouts_is_refined_as_without_us(
    panda_classes, settings
):
    _, module = panda_classes
    gen = _refiners("AtlasProdTaskRefiner")
    plain_map, our_map = scoutless_task(), scoutless_task()
    plain = registered(run_like_jedi(gen, plain_map), plain_map)
    client = FakeClient(prediction())
    refiner = run_like_jedi(
        module.PredictingAtlasProdTaskRefiner,
        our_map,
        client=client,
        settings=settings,
    )
    assert client.definitions == []
    assert registered(refiner, our_map) == plain


def _hide(monkeypatch, dotted):
    """Make ``import dotted`` fail as a broken install would."""
    package, _, name = dotted.rpartition(".")
    monkeypatch.setitem(sys.modules, dotted, None)
    monkeypatch.delattr(sys.modules[package], name, raising=False)


@pytest.mark.parametrize(
    "hidden",
    [
        ["panda_predictor.plugins.jedi_prediction"],
        ["panda_predictor.plugins.jedi_prediction", "panda_predictor.metrics"],
    ],
    ids=["prediction-code", "prediction-code-and-metrics"],
)
def test_import_failure_runs_the_wrapped_refiner_unchanged(
    panda_classes, settings, monkeypatch, caplog, hidden
):
    _, module = panda_classes
    gen = _refiners("AtlasProdTaskRefiner")
    plain_map, our_map = production_task(), production_task()
    plain = registered(run_like_jedi(gen, plain_map), plain_map)
    before = module.FALLBACK_COUNTS["import_error"]
    metric_before = counter(FALLBACKS, "jedi", "import_error")
    for dotted in hidden:
        _hide(monkeypatch, dotted)

    with caplog.at_level("WARNING", logger=module.__name__):
        refiner = run_like_jedi(
            module.PredictingAtlasProdTaskRefiner,
            our_map,
            client=FakeClient(prediction()),
            settings=settings,
        )

    assert registered(refiner, our_map) == plain
    assert module.FALLBACK_COUNTS["import_error"] == before + 1
    metric_after = metric_before + (0 if "panda_predictor.metrics" in hidden else 1)
    assert counter(FALLBACKS, "jedi", "import_error") == metric_after
    assert f"jediTaskID={TASK_ID} no prediction" in caplog.text


def test_exception_escaping_the_prediction_restores_the_map(
    panda_classes, settings, monkeypatch
):
    _, module = panda_classes
    from panda_predictor.plugins import jedi_prediction

    def fill_then_raise(jedi_task_id, task_param_map, **options):
        task_param_map["skipScout"] = True
        raise _Boom("escaped")

    monkeypatch.setattr(jedi_prediction, "predict_into_map", fill_then_raise)
    gen = _refiners("AtlasProdTaskRefiner")
    plain_map, our_map = production_task(), production_task()
    plain = registered(run_like_jedi(gen, plain_map), plain_map)
    before = module.FALLBACK_COUNTS["_Boom"]
    refiner = run_like_jedi(module.PredictingAtlasProdTaskRefiner, our_map)
    assert registered(refiner, our_map) == plain
    assert module.FALLBACK_COUNTS["_Boom"] == before + 1


@pytest.mark.parametrize(
    ("target", "error", "match"),
    [
        ("pandajedi.jedirefine.NoSuchRefiner:NoSuchRefiner", ImportError, "NoSuch"),
        ("pandajedi.jedirefine.GenTaskRefiner:NoSuchClass", ImportError, "NoSuch"),
        ("pandajedi.jedirefine.GenTaskRefiner", ValueError, "module.path:ClassName"),
        (":GenTaskRefiner", ValueError, "Got ':GenTaskRefiner' instead"),
    ],
    ids=["no-module", "no-class", "no-colon", "no-module-name"],
)
def test_a_wrapped_refiner_that_cannot_be_imported_is_a_config_error(
    panda_classes, target, error, match
):
    _, module = panda_classes
    with pytest.raises(error, match=match):
        module.wrapping(target)(JediTaskBuffer(), StandInDDM())


def test_jedi_factory_reports_the_wrapped_refiner_it_cannot_import(
    panda_classes, caplog
):
    """JEDI's plugin factory fails the agent's start, logging our message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pandajedi.jedicore.FactoryBase import FactoryBase

    mod_config = (
        "atlas:managed:tests.plugins.test_jedi_refiner_wrapping:PredictingNothing"
    )
    factory = FactoryBase(
        ["atlas"], ["managed"], logging.getLogger("jedi-test"), mod_config
    )
    with (
        caplog.at_level("ERROR", logger="jedi-test"),
        pytest.raises(ImportError, match="PredictingNothing"),
    ):
        factory.initializeMods(JediTaskBuffer(), StandInDDM())
    assert "wraps the refiner 'site.refiners:NoSuchRefiner'" in caplog.text


#: A site's own wrapped refiner whose class is not installed (the test above).
PredictingNothing = wrapping("site.refiners:NoSuchRefiner", name="PredictingNothing")


def test_jedi_factory_loads_wrapping_refiners_per_label(panda_classes):
    _, module = panda_classes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pandajedi.jedicore.FactoryBase import FactoryBase

    plugin = "panda_predictor.plugins.jedi_refiner"
    mod_config = (
        f"atlas:managed:{plugin}:PredictingAtlasProdTaskRefiner,"
        f"atlas:user:{plugin}:PredictingAtlasAnalTaskRefiner"
    )
    factory = FactoryBase(
        ["atlas"], ["managed", "user"], logging.getLogger("jedi-test"), mod_config
    )
    factory.initializeMods(JediTaskBuffer(), StandInDDM())
    prod = factory.instantiateImpl(
        "atlas", "managed", "prod", JediTaskBuffer(), StandInDDM()
    )
    anal = factory.instantiateImpl("atlas", "user", "anal", JediTaskBuffer(), None)
    assert isinstance(prod, _refiners("AtlasProdTaskRefiner"))
    assert isinstance(anal, _refiners("AtlasAnalTaskRefiner"))
    assert factory.getClassName("atlas", "managed") == "PredictingAtlasProdTaskRefiner"
    assert (prod.vo, prod.prodSourceLabel) == ("atlas", "managed")


def test_plugin_module_imports_nothing_but_the_standard_library():
    """JEDI imports the module at start: nothing of ours can fail there."""
    code = (
        "import sys, panda_predictor.plugins.jedi_refiner as m; "
        "print(sorted(n for n in sys.modules if n.startswith(('panda', 'pydantic', "
        "'sqlalchemy', 'prometheus'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == (
        "['panda_predictor', 'panda_predictor.plugins', "
        "'panda_predictor.plugins.jedi_refiner']"
    )
