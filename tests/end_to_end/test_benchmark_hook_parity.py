"""One model, one answer: the benchmark, the hook, the HTTP service and the refiner.

The trace benchmark predicts each period with ``Predictor.predict_table`` and the
labelled history (see ``pipelines/evaluation/trace/log_walk.py``); the hook reads the
history from the database itself and calls ``Predictor.predict``. Trained once, on
SQLite and PostgreSQL, both must give every task the same decision, classes,
confidences and followed experts.

The last test puts the tasks defined now, some with the requester's presets,
through every consumer of the one decision (``serving/decision.py``): the hook
writes JEDI_TASKS; the benchmark's column form ``decide_table`` and the HTTP
service's records route answer; the JEDI refiner (PanDA's real GenTaskRefiner
wrapped by ours, with the in-process client, not a canned prediction) refines each
task's parameter map, built from the same row. The service and the refiner read the
history indexed as of the tasks' creation (``ServingHistory``). Every task must get
the same decision, and the same values written (each consumer in its own unit),
with the scout rule removed exactly where the decision is ``applied``.
"""

from __future__ import annotations

import copy
import math
from datetime import datetime

import numpy as np
import pytest
from sqlalchemy import select, update

from panda_predictor import taskdef
from panda_predictor.bins_file import load_bins
from panda_predictor.core.domain.requested_values import FAR_FROM_REQUEST
from panda_predictor.core.domain.splitrule import has_scout_rule
from panda_predictor.core.domain.targets import TARGETS
from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.db.reader import (
    INPUT_TYPES,
    find_eligible_tasks,
    read_task_features,
)
from panda_predictor.hook.submit import SubmitHook
from panda_predictor.http_api.results import predict_tasks
from panda_predictor.metrics import TASKS
from panda_predictor.plugins.prediction_client import InProcessClient
from panda_predictor.serving.combination import ServingHistory
from panda_predictor.serving.decision import decide_table
from panda_predictor.serving.predictor import Predictor
from panda_predictor.serving.recent import read_history_frame
from pipelines.simulation import SimulationConfig, simulate_history
from pipelines.simulation.history_writer import load_history
from pipelines.training.config import TrainingConfig
from pipelines.training.dataset import LabelledHistory
from pipelines.training.train import train
from tests.plugins import test_jedi_refiner as refiner_tests
from tests.plugins.test_jedi_refiner import counter, refine, spec_values

#: PanDA's classes, installed once per session (the refiner tests' fixture).
panda_classes = refiner_tests.panda_classes

LATER = datetime(2100, 1, 1)


@pytest.fixture
def parity_db(settings, seed):
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    config = SimulationConfig(n_tasks=600, n_defined=20, seed=seed)
    load_history(engine, settings, simulate_history(config, progress=False))
    yield settings, engine
    engine.dispose()


def test_benchmark_and_hook_predict_the_same(parity_db):
    settings, engine = parity_db

    def read_history():  # the hook's own reader; the simulated past is long ago
        return read_history_frame(engine, settings, now=LATER, days=100 * 365)

    history = read_history()
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30})
    bundle = train(LabelledHistory(history), load_bins(), config).bundle
    assert bundle.combination is not None and bundle.record_start is not None
    predictor = Predictor(bundle, "panda-predictor", "1")

    hook = SubmitHook(
        settings,
        engine,
        predictor_factory=lambda: predictor,
        history_factory=read_history,
    )
    served = hook.run_once(dry_run=True)
    assert served.failure is None
    ids = [p.jeditaskid for p in served.predictions]
    assert len(ids) == 20

    with engine.connect() as conn:
        tasks = read_task_features(conn, settings, ids)
    table = predictor.predict_table(tasks, history).set_index("jeditaskid")
    assert any(p.decision == "applied" for p in served.predictions)
    for p in served.predictions:
        row = table.loc[p.jeditaskid]
        assert row["decision"] == p.decision
        for target, tp in p.targets.items():
            assert row[f"{target}_class"] == tp.class_index
            np.testing.assert_allclose(row[f"{target}_confidence"], tp.confidence)
    followed = {t: table[f"{t}_expert"] for t in bundle.models}
    assert all(len(f) == len(ids) for f in followed.values())


def test_service_history_gives_the_frame_answer_at_its_time(parity_db):
    """The service's indexed history (as of T) equals the frame route for tasks
    created at T: the HTTP service and the JEDI refiner follow the same experts."""
    settings, engine = parity_db
    history = read_history_frame(engine, settings, now=LATER, days=100 * 365)
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30})
    predictor = Predictor(
        train(LabelledHistory(history), load_bins(), config).bundle, "p", "1"
    )
    with engine.connect() as conn:
        ids = sorted(history["jeditaskid"].tail(40))
        tasks = read_task_features(conn, settings, ids).assign(creationdate=LATER)
    served = ServingHistory(history, LATER)
    by_frame = predictor.predict_table(tasks, history).set_index("jeditaskid")
    by_index = predictor.predict_records(tasks.to_dict("records"), served)
    assert len(by_index) == len(ids)
    for p in by_index:
        row = by_frame.loc[p.jeditaskid]
        assert row["decision"] == p.decision
        for target, tp in p.targets.items():
            assert row[f"{target}_class"] == tp.class_index
            np.testing.assert_allclose(
                row[f"{target}_confidence"], tp.confidence, rtol=1e-6
            )
    # The experts are really used: some task follows a rule, not the model.
    experts = np.concatenate(
        [by_frame[f"{t}_expert"].to_numpy() for t in predictor.bundle.models]
    )
    assert (experts != "model").any()


class _CreatedNow(datetime):
    """taskdef's clock, stopped at the time the tasks defined now were created."""

    @classmethod
    def now(cls, tz=None):
        return LATER.replace(tzinfo=tz)


#: Decisions the refiner counts in panda_predictor_tasks_total{hook="jedi"}.
REFINER_DECISIONS = ("applied", "kept_scouts")
#: JEDI_TASKS column -> the task parameter map's key JEDI's refiner fills it from.
MAP_KEYS = {
    "taskname": "taskName",
    "username": "userName",
    "vo": "vo",
    "prodsourcelabel": "prodSourceLabel",
    "architecture": "architecture",
    "transuses": "transUses",
    "transhome": "transHome",
    "transpath": "transPath",
    "processingtype": "processingType",
    "tasktype": "taskType",
    "corecount": "coreCount",
    "workinggroup": "workingGroup",
    "campaign": "campaign",
    "baseramcount": "baseRamCount",
    "ramcount": "ramCount",
    "ramunit": "ramUnit",
    "cputime": "cpuTime",
    "cputimeunit": "cpuTimeUnit",
    "iointensity": "ioIntensity",
    "iointensityunit": "ioIntensityUnit",
    "walltime": "walltime",
    "walltimeunit": "walltimeUnit",
}
#: Per target, the JediTaskSpec attributes the refiner leaves its value and unit in.
SPEC_ATTRIBUTES = {
    "ramcount": ("ramCount", "ramUnit"),
    "cputime": ("cpuTime", "cpuTimeUnit"),
    "iointensity": ("ioIntensity", "ioIntensityUnit"),
    "walltime": ("walltime", "walltimeUnit"),
}
#: The requester's presets (JEDI_TASKS columns) of some tasks defined now, by
#: position among them, and the targets each keeps if it skips its scouts
#: (PanDA's scout rules, core/domain/requested_values.py).
PRESETS = {
    # 0.4 HS06sPerEvent: every cputime class (>= 1) is above twice that, so PanDA
    # would set the task exhausted; it keeps its scouts whatever the cost says.
    0: ({"cputime": 400, "cputimeunit": "mHS06sPerEvent"}, ()),
    # A Fixed unit is never overwritten.
    1: ({"ramcount": 1000, "ramunit": "MBPerCoreFixed"}, ("ramcount",)),
    # A preset walltime above every class value (5000 at most) stays.
    2: ({"walltime": 100_000}, ("walltime",)),
}
FAR_FROM_PRESET_SLOT = 0


def _define_now(engine, settings) -> list[int]:
    """Return the ids of the ``defined`` tasks, now created at LATER, some with
    the requester's presets (:data:`PRESETS`)."""
    jedi = get_panda_tables(settings, engine).jedi_tasks
    defined = jedi.c.status == "defined"
    with engine.begin() as conn:
        conn.execute(update(jedi).where(defined).values(creationdate=LATER))
        ids = sorted(conn.execute(select(jedi.c.jeditaskid).where(defined)).scalars())
        for slot, (columns, _) in PRESETS.items():
            conn.execute(
                update(jedi).where(jedi.c.jeditaskid == ids[slot]).values(**columns)
            )
    return ids


def _jedi_rows(engine, settings, ids) -> dict[int, dict]:
    """Return the JEDI_TASKS rows of ``ids`` as they are now, by task id."""
    jedi = get_panda_tables(settings, engine).jedi_tasks
    with engine.connect() as conn:
        rows = conn.execute(select(jedi).where(jedi.c.jeditaskid.in_(ids))).mappings()
        return {row["jeditaskid"]: dict(row) for row in rows}


def _input_datasets(engine, settings, ids) -> dict[int, list[str]]:
    """Return the names of each task's input datasets (what the hook counts)."""
    datasets = get_panda_tables(settings, engine).jedi_datasets
    query = (
        select(datasets.c.jeditaskid, datasets.c.datasetname)
        .where(datasets.c.jeditaskid.in_(ids), datasets.c.type.in_(INPUT_TYPES))
        .order_by(datasets.c.datasetid)
    )
    names: dict[int, list[str]] = {task_id: [] for task_id in ids}
    with engine.connect() as conn:
        for task_id, name in conn.execute(query):
            names[task_id].append(name)
    return names


def _param_map(row: dict, input_datasets: list[str]) -> dict:
    """Return the task parameter map JEDI refined ``row`` from.

    The task's fields and presets under PanDA's names (NULL: not given), the
    priority GenTaskRefiner requires, and the input datasets by name: at refine
    time JEDI has counted no file or event yet (JEDI_DATASETS holds 0 for a
    ``defined`` task, which the models read as unknown too).
    """
    task_map = {
        key: row[column] for column, key in MAP_KEYS.items() if row[column] is not None
    }
    return {**task_map, "taskPriority": 500, "inDS": input_datasets}


def _refine(panda_classes, maps, client, settings, engine) -> dict[int, tuple]:
    """Return per task (the refiner's decisions, its refiner, PanDA's own refiner).

    The decision is read from panda_predictor_tasks_total{hook="jedi"}: a task the
    refiner failed open on counts none, so it cannot pass for ``kept_scouts``.
    """
    gen, module = panda_classes
    refined = {}
    for task_id, task_map in maps.items():
        before = {d: counter(TASKS, "jedi", d) for d in REFINER_DECISIONS}
        ours = refine(
            module.PredictingGenTaskRefiner,
            copy.deepcopy(task_map),
            client,
            settings,
            # The hook audited these tasks already: the refiner finds them known
            # and adds no row (its audit is tests/plugins/test_jedi_refiner_audit.py).
            audit_bind=engine,
            task_id=task_id,
        )
        decisions = [
            d for d in REFINER_DECISIONS if counter(TASKS, "jedi", d) > before[d]
        ]
        plain = refine(gen, copy.deepcopy(task_map), task_id=task_id)
        refined[task_id] = (decisions, ours, plain)
    return refined


def _written(target: str, value: float, unit: str) -> dict[str, tuple]:
    """Return (value, unit) the hook writes into JEDI_TASKS and the refiner into
    the task spec for one decided value.

    Both write PanDA's stored form on the database path
    (core/domain/units.py, ``database_value``): rounded up to an integer (float
    noise below 1e-6 ignored: 2.3 x 1000 is 2300), cputime in whole
    HS06sPerEvent and never Fixed (PanDA's re-measurement takes the cputime unit
    from the task parameters, which hold neither's value), and no walltime of 0.
    """
    whole = math.ceil(round(value, 6))
    if target == "cputime":
        unit = unit.removesuffix("Fixed")
    if target == "walltime" and whole == 0:
        # PanDA's "no walltime estimate": neither writes it; the row keeps its
        # NULL, the spec TaskRefinerBase's 0 for a map without walltime.
        return {"hook": (None, None), "refiner": (0, None)}
    return {"hook": (whole, unit), "refiner": (whole, unit)}


def _value_mismatches(task_id, prediction, kept, before, row, spec) -> list[str]:
    """Return what the hook's row or the refiner's spec holds other than the
    decided values (or the presets ``kept``), one line per target and consumer."""
    found = []
    for target, tp in prediction.targets.items():
        expected = _written(target, tp.value, tp.unit)
        columns = (TARGETS[target].value_column, TARGETS[target].unit_column)
        if target in kept:  # the requester's value stays, in both
            expected = dict.fromkeys(expected, tuple(before[c] for c in columns))
        value_attr, unit_attr = SPEC_ATTRIBUTES[target]
        got = {
            "hook": tuple(row[c] for c in columns),
            "refiner": (getattr(spec, value_attr), getattr(spec, unit_attr)),
        }
        found += [
            f"jediTaskID={task_id} {consumer} {target} (value, unit): expected "
            f"{expected[consumer]}, got {got[consumer]}"
            for consumer in expected
            if got[consumer] != expected[consumer]
        ]
    return found


def _refiner_differences(task_id, hooked, refined, kept, before, written) -> list[str]:
    """Return where the refiner's decision, scouts or values for one task differ
    from what the hook decided and wrote, one line each (empty: none).

    ``hooked`` is the hook's prediction, ``refined`` what :func:`_refine` gave for
    the task, ``kept`` the targets whose presets stay, ``before``/``written`` the
    JEDI_TASKS rows before and after the hook.
    """
    decisions, ours, plain = refined
    spec, row = ours.taskSpec, written[task_id]
    if decisions != [hooked.decision]:
        return [
            f"jediTaskID={task_id} refiner decisions: expected "
            f"{[hooked.decision]}, got {decisions}"
        ]
    if hooked.decision != "applied":
        # Nothing written: the row as it was, the spec as PanDA's refiner alone
        # makes it, and the scouts run.
        untouched = {
            "hook row": row == before[task_id],
            "refiner spec": spec_values(ours) == spec_values(plain),
        }
        return [
            f"jediTaskID={task_id} {name}: expected untouched, got changed"
            for name, same in untouched.items()
            if not same
        ]
    scouts = {"hook": has_scout_rule(row["splitrule"]), "refiner": spec.useScout()}
    found = [
        f"jediTaskID={task_id} {name} scouts: expected skipped, got kept"
        for name, scouting in scouts.items()
        if scouting
    ]
    return found + _value_mismatches(task_id, hooked, kept, before[task_id], row, spec)


def test_hook_http_refiner_and_benchmark_write_the_same_values(
    parity_db, panda_classes, monkeypatch
):
    """The one decision (serving/decision.py) behind every consumer: for tasks
    defined now, the hook (frame history; it writes JEDI_TASKS), the benchmark's
    column form, the HTTP service's records route and the JEDI refiner (PanDA's
    GenTaskRefiner with our in-process client; both on the history indexed as of
    now) give every task the same decision and written values; the hook, HTTP
    and the column form also the same class and confidence."""
    settings, engine = parity_db
    defined = _define_now(engine, settings)
    history = read_history_frame(engine, settings, now=LATER, days=100 * 365)
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30})
    predictor = Predictor(
        train(LabelledHistory(history), load_bins(), config).bundle, "p", "1"
    )
    served = ServingHistory(history, LATER)
    with engine.connect() as conn:
        ids = find_eligible_tasks(conn, settings, limit=100)
        tasks = read_task_features(conn, settings, ids)
    before = _jedi_rows(engine, settings, defined)
    inputs = _input_datasets(engine, settings, defined)

    hook = SubmitHook(
        settings,
        engine,
        predictor_factory=lambda: predictor,
        history_factory=lambda: history,
    )
    report = hook.run_once()
    assert report.failure is None
    hooked = {p.jeditaskid: p for p in report.predictions}
    assert sorted(hooked) == ids and len(ids) == 20
    applied = sorted(i for i, p in hooked.items() if p.decision == "applied")
    assert sorted(report.applied) == applied  # every applied task was written
    table = decide_table(predictor, tasks, history).set_index("jeditaskid")
    http = {
        r["jediTaskID"]: r
        for r in predict_tasks(
            predictor, tasks.to_dict("records"), served, explain_features=False
        )
    }
    # JEDI's map carries no creation time: the refiner stamps a task created when
    # it refines it (taskdef's clock), here when the hook saw the tasks created.
    monkeypatch.setattr(taskdef, "datetime", _CreatedNow)
    # The project's real local client, on the service's history as of that time
    # (its history_factory; in production its background refresher reads the same
    # history as of the clock: tests/plugins/test_prediction_client_history.py).
    client = InProcessClient(
        settings, predictor_factory=lambda: predictor, history_factory=lambda: served
    )
    maps = {i: _param_map(before[i], inputs[i]) for i in defined}
    refined = _refine(panda_classes, maps, client, settings, engine)

    assert {p.decision for p in report.predictions} >= {"applied"}
    for p in report.predictions:
        row, answer = table.loc[p.jeditaskid], http[p.jeditaskid]
        assert row["decision"] == p.decision == answer["decision"]
        for target, tp in p.targets.items():
            by_http = answer["targets"][target]
            assert row[f"{target}_class"] == tp.class_index == by_http["class_index"]
            np.testing.assert_allclose(
                [row[f"{target}_value"], by_http["value"]], tp.value, rtol=1e-6
            )
            assert by_http["unit"] == tp.unit
            np.testing.assert_allclose(row[f"{target}_confidence"], tp.confidence)
            # The service prints confidences to 4 decimals.
            assert by_http["confidence"] == pytest.approx(tp.confidence, abs=5e-5)

    # The refiner, on the tasks it refines (defined: no input counted yet).
    assert {hooked[i].decision for i in defined} == {"applied", "kept_scouts"}
    far = hooked[defined[FAR_FROM_PRESET_SLOT]]
    assert far.decision == "kept_scouts" and far.reason.startswith(FAR_FROM_REQUEST)
    written = _jedi_rows(engine, settings, defined)
    kept = {defined[slot]: targets for slot, (_, targets) in PRESETS.items()}
    differences = [
        line
        for i in defined
        for line in _refiner_differences(
            i, hooked[i], refined[i], kept.get(i, ()), before, written
        )
    ]
    assert not differences, "\n".join(differences)
