"""Shadow mode and the rollout share in the JEDI refiner and the HTTP service.

The refiner runs against PanDA's real GenTaskRefiner and audits on SQLite and
PostgreSQL; the service answers through Flask's test client with a real bundle.
"""

from __future__ import annotations

import pytest

from panda_predictor.core.decide.rollout import HELD_BACK, SHADOW, in_rollout
from panda_predictor.http_api import create_app
from panda_predictor.metrics import TASKS
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import load_settings
from tests.hook.test_submit_shadow import jedi_tasks_dump
from tests.http_api.test_app import TASK
from tests.http_api.test_app_db import AUTH, _defined_ids, _simulated_db
from tests.plugins import test_jedi_refiner as refiner_tests
from tests.plugins.test_jedi_refiner import (
    FakeClient,
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


@pytest.fixture
def plain(panda_classes):
    """Return (map, refiner) as PanDA's GenTaskRefiner alone makes them."""
    gen, _ = panda_classes
    task_map = param_map()
    return task_map, refine(gen, task_map)


@pytest.mark.parametrize("decision", ["applied", "kept_scouts"])
def test_refiner_in_shadow_writes_nothing_into_the_task_and_audits_shadow(
    panda_classes, plain, db, settings, decision
):
    _, module = panda_classes
    plain_map, plain_refiner = plain
    settings = settings.model_copy(update={"mode": "shadow"})
    before = counter(TASKS, "jedi", SHADOW)
    task_map = param_map()
    client = FakeClient(prediction(decision))
    refiner = refine(
        module.PredictingGenTaskRefiner, task_map, client, settings, audit_bind=db
    )
    assert len(client.definitions) == 1  # it did predict
    assert task_map == plain_map
    assert spec_values(refiner) == spec_values(plain_refiner)
    assert "US=2" in refiner.taskSpec.splitRule
    assert counter(TASKS, "jedi", SHADOW) == before + 1
    row = audit_rows(db, settings)[TASK_ID]
    assert row["decision"] == SHADOW and row["written_at"] is None
    assert row["ramcount_value"] == 3000 and row["model_version"] == "3"
    expected = (
        "shadow: would apply"
        if decision == "applied"
        else "shadow: would keep scouts: low confidence: ramcount"
    )
    assert row["reason"] == expected


def test_refiner_outside_the_share_keeps_scouts_audited_held_back(
    panda_classes, db, settings
):
    gen, module = panda_classes
    share = 0.5
    # One id on each side of the share, found by the same hash the refiner uses.
    outside = next(i for i in range(4000, 5000) if not in_rollout(i, share))
    inside = next(i for i in range(4000, 5000) if in_rollout(i, share))
    settings = settings.model_copy(update={"rollout_share": share})
    plain_map = param_map()
    plain_refiner = refine(gen, plain_map, task_id=outside)
    held_map = param_map()
    held = refine(
        module.PredictingGenTaskRefiner,
        held_map,
        FakeClient(prediction()),
        settings,
        audit_bind=db,
        task_id=outside,
    )
    assert held_map == plain_map
    assert spec_values(held) == spec_values(plain_refiner)
    applied_map = param_map()
    applied = refine(
        module.PredictingGenTaskRefiner,
        applied_map,
        FakeClient(prediction()),
        settings,
        audit_bind=db,
        task_id=inside,
    )
    assert applied.taskSpec.useScout() is False
    audits = audit_rows(db, settings)
    assert audits[outside]["decision"] == HELD_BACK
    assert audits[outside]["reason"] == "held back (rollout_share=0.5): would apply"
    assert audits[inside]["decision"] == "applied"


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "1")


def _post(settings, predictor, body):
    app = create_app(settings, predictor_loader=lambda: predictor)
    try:
        with app.test_client() as client:
            response = client.post("/v1/predictions", json=body)
    finally:
        app.extensions["panda_predictor"].close()
    assert response.status_code == 200, response.get_json()
    return response.get_json()["predictions"]


def test_service_in_shadow_answers_shadow_with_the_same_prediction(tmp_path, predictor):
    tasks = [
        {**TASK, "jediTaskID": 4000000 + i, "coreCount": 1 + i % 8} for i in range(12)
    ]
    live = _post(load_settings(home=tmp_path), predictor, tasks)
    shadow = _post(load_settings(home=tmp_path, mode="shadow"), predictor, tasks)
    for said, shadowed in zip(live, shadow, strict=True):
        assert shadowed["decision"] == SHADOW and shadowed["scouts"] == "kept"
        assert shadowed["targets"] == said["targets"]
        would = "apply" if said["decision"] == "applied" else "keep scouts"
        assert shadowed["reason"].startswith(f"shadow: would {would}")


def test_service_holds_back_the_tasks_outside_the_share(tmp_path, predictor):
    tasks = [{**TASK, "jediTaskID": 4000000 + i} for i in range(20)]
    live = _post(load_settings(home=tmp_path), predictor, tasks)
    half = _post(load_settings(home=tmp_path, rollout_share=0.5), predictor, tasks)
    for said, answer in zip(live, half, strict=True):
        if in_rollout(answer["jediTaskID"], 0.5):
            assert answer["decision"] == said["decision"]
        else:
            assert answer["decision"] == HELD_BACK and answer["scouts"] == "kept"
    assert {a["decision"] for a in half} & {HELD_BACK}


def test_post_task_in_shadow_writes_nothing_and_answers_shadow(
    settings, seed, predictor
):
    loaded = _simulated_db(settings, seed, n_defined=3).model_copy(
        update={"mode": "shadow"}
    )
    task_id = _defined_ids(loaded)[0]
    before = jedi_tasks_dump(loaded)
    app = create_app(loaded, predictor_loader=lambda: predictor)
    try:
        with app.test_client() as client:
            response = client.post(f"/v1/tasks/{task_id}/prediction", headers=AUTH)
            audit = client.get(f"/v1/tasks/{task_id}/prediction").get_json()
    finally:
        app.extensions["panda_predictor"].close()
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert (body["outcome"], body["written"]) == (SHADOW, False)
    assert body["prediction"]["decision"] == SHADOW
    assert audit["audit"]["decision"] == SHADOW
    assert jedi_tasks_dump(loaded) == before
