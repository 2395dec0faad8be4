"""The hook's ``publish`` output end to end: hook -> RabbitMQ -> AIParameterAdjuster.

On PanDA's real PostgreSQL schema; the model is a fixed predictor (our own
interface), JEDI's task buffer the stand-in of tests/message_parts.py.
"""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from panda_predictor.db.engine import make_engine
from panda_predictor.hook.submit import SubmitHook
from panda_predictor.messages.consumer import StompConsumer
from panda_predictor.plugins.ai_parameter_adjuster import AIParameterAdjuster, Delivery
from tests.message_parts import (
    StandInTaskBuffer,
    broker_settings,
    build_panda_database,
    drop_database,
    insert_tasks,
    prediction,
    require_broker,
    reset_tables,
    task,
)

pytestmark = pytest.mark.postgres
IDS = list(range(1, 31))


class FixedPredictor:
    """Predicts every task alike (our predictor interface: predict(frame, history))."""

    model_name, model_version = "panda-predictor", "7"

    def predict(self, tasks, history=None):
        return [prediction(int(i)) for i in tasks["jeditaskid"]]


@pytest.fixture(scope="module")
def panda_db(tmp_path_factory):
    name, settings = build_panda_database(tmp_path_factory.mktemp("panda"))
    yield settings
    drop_database(name)


@pytest.fixture
def panda(panda_db):
    require_broker()
    engine = make_engine(panda_db)
    reset_tables(engine)
    insert_tasks(engine, IDS)
    yield broker_settings(panda_db, output="publish"), engine
    engine.dispose()


def run_hook(settings):
    hook = SubmitHook(
        settings, predictor_factory=FixedPredictor, history_factory=lambda: None
    )
    try:
        return hook.run_once()
    finally:
        if hook.publisher is not None:
            hook.publisher.close()
        hook.engine.dispose()


def count(engine, table, where="TRUE"):
    with engine.connect() as conn:
        return conn.execute(
            sa.text(f"SELECT count(*) FROM doma_panda.{table} WHERE {where}")
        ).scalar()


def consume(settings, engine, n):
    plugin = AIParameterAdjuster(task_buffer=StandInTaskBuffer(engine), engine=engine)
    plugin.params["config_file"] = None
    plugin.initialize()
    done = threading.Event()

    def handle(batch):
        plugin.process_batch([Delivery(m.message_id, m.body) for m in batch])
        if count(engine, "pp_message_applied") >= n:
            done.set()

    consumer = StompConsumer(settings, handle)
    thread = threading.Thread(target=consumer.run, kwargs={"until": done.is_set})
    thread.start()
    thread.join(60)
    consumer.stop()


def test_the_hook_publishes_and_jedi_applies(panda, monkeypatch):
    settings, engine = panda
    monkeypatch.setenv("PANDA_PREDICTOR_DB_URL", settings.db_url)
    monkeypatch.setenv("PANDA_PREDICTOR_DB_SCHEMA", "doma_panda")
    report = run_hook(settings)
    assert report.failure is None
    decided = sorted(report.applied + report.kept_scouts)
    assert decided == IDS
    # The hook wrote nothing into JEDI_TASKS: the scouts are JEDI's to skip.
    assert all("US=2" in task(engine, i)["splitrule"] for i in IDS)
    assert count(engine, "pp_prediction_audit", "written_at IS NULL") == 30
    assert count(engine, "pp_message_published", "receipt IS NOT NULL") == 30
    # A second pass finds every task audited: nothing is published again.
    assert run_hook(settings).written == 0
    consume(settings, engine, 30)
    assert count(engine, "pp_message_applied") == 30
    applied = count(engine, "pp_message_applied", "outcome = 'applied'")
    assert applied == len(report.applied)
    assert all(
        "US=2" not in (task(engine, i)["splitrule"] or "") for i in report.applied
    )


def test_a_lost_broker_fails_the_pass_and_leaves_the_tasks_eligible(panda):
    settings, engine = panda
    down = settings.model_copy(update={"broker_port": 1, "broker_retry_seconds": 0.5})
    report = run_hook(down)
    assert report.failure is not None and "BrokerUnavailable" in report.failure
    assert count(engine, "pp_prediction_audit") == 0
    assert count(engine, "pp_message_published") == 0
    report = run_hook(settings)  # the broker is back: every task is published
    assert report.failure is None
    assert count(engine, "pp_message_published") == 30
