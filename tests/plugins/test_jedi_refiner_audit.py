"""The JEDI refiner audits every decision in pp_prediction_audit, as the hook does,
on SQLite and PostgreSQL; an audit that cannot be written never stops JEDI; without
a database chosen by the operator it predicts and audits nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from panda_predictor.db.engine import make_engine
from panda_predictor.hook.submit import LEGACY_REASON, SubmitHook
from panda_predictor.metrics import FALLBACKS
from panda_predictor.plugins.prediction_client import InProcessClient
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
    refine,
    spec_values,
)
from tests.test_db_support import audit_rows

#: PanDA's classes, installed once per session (the refiner tests' fixture).
panda_classes = refiner_tests.panda_classes

TASK_ID = 4242


@pytest.mark.parametrize(
    ("outcome", "decision", "written"),
    [
        (prediction("applied"), "applied", True),
        (prediction("kept_scouts"), "kept_scouts", False),
        (_Boom("model exploded"), "error", False),
    ],
    ids=["applied", "kept_scouts", "error"],
)
def test_refiner_audits_its_decision(
    panda_classes, db, settings, outcome, decision, written
):
    _, module = panda_classes
    refine(
        module.PredictingGenTaskRefiner,
        param_map(),
        FakeClient(outcome),
        settings,
        audit_bind=db,
        task_id=TASK_ID,
    )
    audits = audit_rows(db, settings)
    assert list(audits) == [TASK_ID]
    row = audits[TASK_ID]
    assert row["decision"] == decision
    assert (row["written_at"] is not None) is written
    if decision == "error":
        assert row["reason"] == "prediction failed: _Boom: model exploded"
    else:
        assert row["model_version"] == "3"
        assert row["ramcount_value"] == 3000 and row["ramcount_unit"] == "MBPerCore"


def test_refiner_audits_the_kill_switch(panda_classes, db, settings, tmp_path):
    _, module = panda_classes
    switch = tmp_path / "legacy"
    switch.touch()
    settings = settings.model_copy(update={"kill_switch_file": switch})
    refine(
        module.PredictingGenTaskRefiner,
        param_map(),
        FakeClient(prediction()),
        settings,
        audit_bind=db,
        task_id=TASK_ID,
    )
    row = audit_rows(db, settings)[TASK_ID]
    assert (row["decision"], row["reason"]) == ("kept_scouts", LEGACY_REASON)


def test_refiner_does_not_audit_a_task_that_already_skips_scouts(
    panda_classes, db, settings
):
    _, module = panda_classes
    refine(
        module.PredictingGenTaskRefiner,
        param_map(skipScout=True),
        FakeClient(prediction()),
        settings,
        audit_bind=db,
    )
    assert audit_rows(db, settings) == {}


def test_audit_failure_never_stops_jedi(panda_classes, engine, settings):
    """No audit table at all: the task is still refined with the prediction."""
    _, module = panda_classes
    before = counter(FALLBACKS, "jedi", "audit_failed")
    task_map = param_map()
    refiner = refine(
        module.PredictingGenTaskRefiner,
        task_map,
        FakeClient(prediction()),
        settings,
        audit_bind=engine,  # an empty database
    )
    assert refiner.taskSpec.useScout() is False
    assert refiner.taskSpec.ramCount == 3000
    assert counter(FALLBACKS, "jedi", "audit_failed") == before + 1


def test_hook_does_not_predict_a_task_the_refiner_kept_on_scouts(
    panda_classes, db, settings
):
    """The refiner's kept_scouts task has US= in JEDI_TASKS; its audit row keeps the
    database hook from predicting it a second time."""
    from tests.test_db_support import add_task

    _, module = panda_classes
    refine(
        module.PredictingGenTaskRefiner,
        param_map(),
        FakeClient(prediction("kept_scouts")),
        settings,
        audit_bind=db,
        task_id=TASK_ID,
    )
    add_task(db, settings, TASK_ID)  # JEDI inserts the refined task

    class NoModel:
        def predict(self, tasks, history=None):
            raise AssertionError("the task was already decided by the refiner")

    hook = SubmitHook(
        settings,
        engine=make_engine(settings),
        predictor_factory=NoModel,
        history_factory=lambda: None,
    )
    report = hook.run_once()
    hook.engine.dispose()
    assert report.failure is None and report.predictions == []


def test_without_a_database_jedi_s_refiner_predicts_nothing(
    panda_classes, tmp_path, monkeypatch, caplog
):
    """No db_url and the default relative home, as in a JEDI daemon given no
    database: each task is refined as PanDA's refiner alone does, counted
    ``no_database``, nothing is written under JEDI's working directory (no SQLite
    file, no audit), no history thread starts, and one error names the settings."""
    from panda_predictor.plugins import jedi_prediction

    gen, module = panda_classes
    monkeypatch.chdir(tmp_path)  # JEDI's working directory
    module.reset_shared_client()
    before = counter(FALLBACKS, "jedi", "no_database")
    threads = {t.name for t in threading.enumerate()}
    task_ids = [TASK_ID, TASK_ID + 1]
    try:
        with caplog.at_level("INFO", logger=module.__name__):
            for task_id in task_ids:
                task_map = param_map()
                # Built as JEDI's plugin factory does: no arguments of ours.
                refiner = module.PredictingGenTaskRefiner(StandInTaskBuffer(), None)
                refiner.extractCommon(task_id, task_map, StandInWorkQueues(), None)
                plain_map = param_map()
                plain_refiner = refine(gen, plain_map, task_id=task_id)
                assert task_map == plain_map
                assert spec_values(refiner) == spec_values(plain_refiner)
        settings, client = jedi_prediction._shared_settings_and_client()
    finally:
        module.reset_shared_client()
    assert settings.db_url is None and not settings.home.is_absolute()
    assert counter(FALLBACKS, "jedi", "no_database") == before + len(task_ids)
    assert list(tmp_path.iterdir()) == []
    assert isinstance(client, InProcessClient)
    assert client.history_refresher is None
    assert {t.name for t in threading.enumerate()} <= threads
    [error] = [r for r in caplog.records if r.levelname == "ERROR"]
    assert error.getMessage().startswith("db_url is not set: the JEDI refiner")
    assert "PANDA_PREDICTOR_DB_URL" in error.getMessage()
    assert "PANDA_PREDICTOR_HOME to an absolute folder" in error.getMessage()
    for task_id in task_ids:
        assert (
            f"jediTaskID={task_id} prediction failed open, scouts run "
            "(reason=no_database)" in caplog.text
        )


@pytest.mark.parametrize(
    ("db_url", "absolute_home", "predicted"),
    [
        pytest.param(None, False, False, id="no-db_url-relative-home"),
        pytest.param("sqlite:///:memory:", False, True, id="db_url"),
        pytest.param(None, True, True, id="absolute-home"),
    ],
)
def test_the_refiner_predicts_only_with_a_chosen_database(
    panda_classes, tmp_path, monkeypatch, db_url, absolute_home, predicted
):
    """The embedded SQLite is used when chosen (an absolute home), never by default."""
    _, module = panda_classes
    monkeypatch.chdir(tmp_path)
    home = tmp_path if absolute_home else Path("var")
    settings = load_settings(home=home, db_url=db_url)
    client = FakeClient(prediction())
    before = counter(FALLBACKS, "jedi", "no_database")
    refine(module.PredictingGenTaskRefiner, param_map(), client, settings)
    assert len(client.definitions) == int(predicted)
    assert counter(FALLBACKS, "jedi", "no_database") == before + (not predicted)
