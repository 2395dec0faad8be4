"""The scout_prediction route on real parts: PanDA's PostgreSQL schema and RabbitMQ.

JEDI's task buffer is the stand-in of tests/message_parts.py (JEDI's own needs a full
JEDI); everything else is real: PanDA's DDL, the broker, stomp.py, the plugin.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
import sqlalchemy as sa

from panda_predictor.db.engine import make_engine
from panda_predictor.messages.consumer import StompConsumer
from panda_predictor.messages.publisher import OutgoingMessage, StompPublisher
from panda_predictor.messages.scout_prediction import from_prediction
from panda_predictor.plugins.ai_parameter_adjuster import (
    AIParameterAdjuster,
    Delivery,
)
from tests.message_parts import (
    StandInTaskBuffer,
    broker_settings,
    build_panda_database,
    drop_database,
    expired_copy,
    insert_tasks,
    prediction,
    require_broker,
    reset_tables,
    task,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def panda_db(tmp_path_factory):
    name, settings = build_panda_database(tmp_path_factory.mktemp("panda"))
    yield settings
    drop_database(name)


@pytest.fixture
def panda(panda_db):
    engine = make_engine(panda_db)
    reset_tables(engine)
    yield panda_db, engine
    engine.dispose()


def adjuster(settings, engine, writer="task_buffer"):
    params = {"engine": engine, "writer": writer}
    if writer == "task_buffer":
        params["task_buffer"] = StandInTaskBuffer(engine)
    plugin = AIParameterAdjuster(**params)
    plugin.settings = settings
    plugin.initialize()
    return plugin


class Msg:
    """What JEDI's message processor hands to process(): msg_id, sub_id, data."""

    def __init__(self, data, msg_id="m-1"):
        self.data, self.msg_id, self.sub_id = data, msg_id, "sub"


def body(task_id, **kwargs):
    return from_prediction(prediction(task_id, **kwargs), ttl_seconds=600).to_json()


def handled(engine):
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT * FROM doma_panda.pp_message_applied")
        ).mappings()
        return {r["jeditaskid"]: dict(r) for r in rows}


@pytest.fixture(autouse=True)
def _settings_env(panda_db, monkeypatch):
    # The plugin reads its settings as JEDI would: from PANDA_PREDICTOR_CONFIG.
    path = panda_db.home / "predictor.yaml"
    path.write_text(
        f"db_url: {panda_db.db_url}\ndb_schema: doma_panda\nhome: {panda_db.home}\n"
    )
    monkeypatch.setenv("PANDA_PREDICTOR_CONFIG", str(path))


def test_applied_through_jedi_calls_with_resource_type_reset(panda):
    settings, engine = panda
    insert_tasks(engine, [1])
    plugin = adjuster(settings, engine)
    plugin.process(Msg(body(1)))
    row = task(engine, 1)
    assert row["splitrule"] == "NG=1,TW=1"
    assert (row["ramcount"], row["ramunit"]) == (2600, "MBPerCore")
    assert (row["cputime"], row["cputimeunit"]) == (5, "HS06sPerEvent")  # 4.2 up
    assert (row["iointensity"], row["walltime"]) == (300, 20)
    # 2600 x 0.9 = 2340 MB per core > SCORE's 2000: PanDA's rule says SCORE_HIMEM.
    assert row["resource_type"] == "SCORE_HIMEM"
    calls = plugin.applier.tb_writer.tb.calls
    assert calls == [
        "getTaskWithID_JEDI",
        "updateTask_JEDI",
        "reset_resource_type_task",
    ]
    assert handled(engine)[1]["outcome"] == "applied"


@pytest.mark.parametrize("writer", ["task_buffer", "sql"])
def test_a_redelivered_message_changes_nothing(panda, writer):
    settings, engine = panda
    insert_tasks(engine, [1])
    plugin = adjuster(settings, engine, writer)
    message = body(1)
    plugin.process(Msg(message, "m-1"))
    first = task(engine, 1)
    plugin.process(Msg(message, "m-2"))
    plugin.process(Msg(message, "m-3"))
    assert task(engine, 1) == first
    row = handled(engine)[1]
    assert (row["outcome"], row["deliveries"]) == ("applied", 3)


@pytest.mark.parametrize("writer", ["task_buffer", "sql"])
def test_poison_messages_cost_only_themselves(panda, writer):
    settings, engine = panda
    insert_tasks(engine, [1, 5, 6])
    insert_tasks(engine, [3], status="ready")
    insert_tasks(engine, [4])
    wrong_unit = json.loads(body(6))
    wrong_unit["values"]["ramUnit"] = "GBPerCore"
    batch = [
        Delivery("a", body(1)),
        Delivery("b", "{malformed"),
        Delivery("c", body(999)),
        Delivery("d", json.dumps(wrong_unit)),
        Delivery("e", body(3)),
        Delivery("f", json.dumps(expired_copy(json.loads(body(4))))),
        Delivery("g", body(5)),
    ]
    plugin = adjuster(settings, engine, writer)
    outcomes = [h.outcome for h in plugin.process_batch(batch)]
    assert outcomes == [
        "applied",
        "rejected",
        "refused",
        "rejected",
        "refused",
        "expired",
        "applied",
    ]
    for applied in (1, 5):
        assert task(engine, applied)["splitrule"] == "NG=1,TW=1"
    for untouched in (3, 4, 6):
        row = task(engine, untouched)
        assert (row["splitrule"], row["ramcount"]) == ("NG=1,US=2,TW=1", 1000)
    rows = handled(engine)
    assert "not 'defined'" in rows[3]["reason"]
    assert "unknown task" in rows[999]["reason"]
    assert "ramUnit" in rows[6]["reason"]
    assert rows[None]["outcome"] == "rejected"  # the malformed one: no task id
    assert len(rows) == 7


def marked(engine):
    with engine.connect() as conn:
        return set(
            conn.execute(
                sa.text("SELECT jeditaskid FROM doma_panda.pp_early_remeasure")
            ).scalars()
        )


@pytest.mark.parametrize("writer", ["task_buffer", "sql"])
def test_an_applied_early_remeasurement_marks_its_task_once(panda, writer):
    settings, engine = panda
    insert_tasks(engine, [1, 2, 4])
    insert_tasks(engine, [3], status="ready")
    plugin = adjuster(settings, engine, writer)
    early = body(1, early_remeasure=True)
    batch = [
        Delivery("a", early),
        Delivery("b", body(2)),  # applied without asking
        Delivery("c", body(3, early_remeasure=True)),  # refused: not defined
        Delivery("d", body(4, decision="kept_scouts")),
    ]
    outcomes = [h.outcome for h in plugin.process_batch(batch)]
    assert outcomes == ["applied", "applied", "refused", "kept_scouts"]
    assert marked(engine) == {1}
    plugin.process(Msg(early, "m-again"))  # redelivered: no second mark, no error
    assert marked(engine) == {1}
    assert handled(engine)[1]["deliveries"] == 2


def test_fixed_units_and_a_larger_walltime_stay(panda):
    settings, engine = panda
    insert_tasks(
        engine, [1], ramunit="MBPerCoreFixed", walltime=500, walltimeunit="kSI2kseconds"
    )
    adjuster(settings, engine).process(Msg(body(1)))
    row = task(engine, 1)
    assert (row["ramcount"], row["ramunit"]) == (1000, "MBPerCoreFixed")
    assert row["walltime"] == 500
    assert row["cputime"] == 5
    assert "MBPerCoreFixed is never overwritten" in handled(engine)[1]["reason"]


def test_the_sql_writer_skips_a_row_jedi_holds_without_waiting(panda):
    settings, engine = panda
    insert_tasks(engine, [1, 2])
    plugin = adjuster(settings, engine, "sql")
    with engine.connect() as jedi:
        jedi.begin()
        jedi.execute(
            sa.text(
                "SELECT * FROM doma_panda.jedi_tasks WHERE jeditaskid = 1 FOR UPDATE"
            )
        )
        started = time.monotonic()
        outcomes = plugin.process_batch(
            [Delivery("a", body(1)), Delivery("b", body(2))]
        )
        waited = time.monotonic() - started
        jedi.rollback()
    # A wait would end in the writer's lock timeout (an error, not this reason).
    assert [h.outcome for h in outcomes] == ["refused", "applied"]
    assert "locked by JEDI" in outcomes[0].reason
    assert waited < 10.0


def test_a_fault_that_is_not_the_message_raises_and_leaves_the_task(panda):
    settings, engine = panda
    insert_tasks(engine, [1])
    plugin = adjuster(settings, engine)
    down = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:1/none")
    plugin.applier.engine = down
    with pytest.raises(Exception, match="(?i)connect"):
        plugin.process(Msg(body(1)))
    assert task(engine, 1)["splitrule"] == "NG=1,US=2,TW=1"


def _consume(settings, plugin, until):
    consumer = StompConsumer(
        settings,
        lambda batch: plugin.process_batch(
            [Delivery(m.message_id, m.body) for m in batch]
        ),
    )
    thread = threading.Thread(target=consumer.run, kwargs={"until": until})
    thread.start()
    return consumer, thread


def test_published_messages_are_applied_through_the_broker(panda):
    require_broker()
    settings, engine = panda
    settings = broker_settings(settings)
    ids = list(range(1, 51))
    insert_tasks(engine, ids)
    early = set(ids[::2])
    messages = [
        from_prediction(prediction(i, early_remeasure=i in early), 600) for i in ids
    ]
    publisher = StompPublisher(settings)
    receipts = publisher.publish(
        [OutgoingMessage(m.idempotency_key, m.task_id, m.to_json()) for m in messages]
    )
    publisher.close()
    assert len(receipts) == 50
    plugin = adjuster(settings, engine, "sql")
    consumer, thread = _consume(settings, plugin, lambda: len(handled(engine)) >= 50)
    thread.join(60)
    consumer.stop()
    assert {r["outcome"] for r in handled(engine).values()} == {"applied"}
    assert all(task(engine, i)["splitrule"] == "NG=1,TW=1" for i in ids)
    assert marked(engine) == early  # the hook asks for these after 3 settled jobs


def _rabbitmqctl(*args):
    subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, timeout=60)


def test_a_broker_restart_loses_nothing_and_applies_nothing_twice(panda):
    require_broker()
    settings, engine = panda
    settings = broker_settings(settings, broker_receipt_timeout_seconds=2.0)
    ids = list(range(1, 201))
    insert_tasks(engine, ids)
    plugin = adjuster(settings, engine, "sql")
    consumer, thread = _consume(settings, plugin, lambda: len(handled(engine)) >= 200)
    publisher = StompPublisher(settings)
    confirmed: dict[str, str] = {}

    def publish():
        for start in range(0, 200, 5):  # ~8 s of sending, the restart inside
            batch = [
                from_prediction(prediction(i), 600) for i in ids[start : start + 5]
            ]
            confirmed.update(
                publisher.publish(
                    [
                        OutgoingMessage(m.idempotency_key, m.task_id, m.to_json())
                        for m in batch
                    ]
                )
            )
            time.sleep(0.2)

    sender = threading.Thread(target=publish)
    sender.start()
    time.sleep(0.5)
    _rabbitmqctl("stop_app")
    _rabbitmqctl("start_app")
    sender.join(120)
    publisher.close()
    thread.join(120)
    consumer.stop()
    rows = handled(engine)
    assert len(confirmed) == 200
    assert len(rows) == 200  # 0 lost, every message audited
    assert {r["outcome"] for r in rows.values()} == {"applied"}  # 0 applied twice
    assert all(task(engine, i)["splitrule"] == "NG=1,TW=1" for i in ids)
    assert publisher.reconnects + consumer.reconnects >= 1  # the restart was felt
