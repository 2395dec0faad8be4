"""The JEDI refiner predicting through the HTTP service on a real loopback server:
a task the decision flags for the early re-measurement is written, audited and
marked in pp_early_remeasure, as the in-process refiner marks it, on SQLite and
PostgreSQL."""

from __future__ import annotations

import dataclasses

import pytest
import sqlalchemy as sa

from panda_predictor.db.early_remeasure import early_remeasure_table
from panda_predictor.http_api.app import create_app
from panda_predictor.plugins.http_client import HttpClient
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor
from tests.plugins import test_jedi_refiner as refiner_tests
from tests.plugins import test_prediction_client as client_tests
from tests.plugins.test_jedi_refiner import param_map, refine
from tests.test_db_support import audit_rows

#: PanDA's classes and the loopback server, as the refiner and client tests have them.
panda_classes = refiner_tests.panda_classes
serve = client_tests.serve

TASK_ID = 5151
PRICED = ("ramcount", "cputime", "walltime")


def served_predictor(bundle_dir, early: bool) -> Predictor:
    """Return the test bundle's predictor with every priced target at its scouts'
    value: with the early re-measurement on, every applied task is flagged."""
    bundle = load_bundle(bundle_dir)
    cost = dataclasses.replace(
        bundle.cost, scouts_value_targets=PRICED, early_remeasure=early
    )
    return Predictor(bundle, "panda-predictor", "1", cost)


def marked(db, settings) -> list[int]:
    table = early_remeasure_table(settings.plugin_schema_for(db.dialect.name))
    with db.connect() as conn:
        return sorted(conn.execute(sa.select(table.c.jeditaskid)).scalars())


@pytest.mark.parametrize("early", [True, False], ids=["flagged", "not-flagged"])
def test_the_refiner_marks_what_the_service_flags(
    panda_classes, serve, db, settings, trained_bundle_dir, early
):
    _, module = panda_classes
    predictor = served_predictor(trained_bundle_dir, early)
    app = create_app(settings, predictor_loader=lambda: predictor)
    client = HttpClient(serve(app), timeout=10.0)
    refiner = refine(
        module.PredictingGenTaskRefiner,
        param_map(),
        client,
        settings,
        audit_bind=db,
        task_id=TASK_ID,
    )
    row = audit_rows(db, settings)[TASK_ID]
    assert row["decision"] == "applied" and row["written_at"] is not None
    # The scouts' values were written: the task asks for no scouts.
    assert refiner.taskSpec.useScout() is False
    assert marked(db, settings) == ([TASK_ID] if early else [])
