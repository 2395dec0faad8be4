"""PanDA's own message-processor agent runs the AIParameterAdjuster from its config.

``pandacommon.pandamsgbkr.msg_processor.MsgProcAgentBase`` (the agent JEDI's
``JediMsgProcessor`` runs) is started on the JSON config of docs/jedi-plugin.md,
pointed at the local RabbitMQ; it loads the plugin with PanDA's plugin factory,
listens with PanDA's MBListenerProxy and hands each message to ``process``. JEDI's
task buffer needs a full JEDI (``BaseMsgProcPlugin`` does not import without rucio),
so the plugin runs with ``writer: sql`` on PanDA's real PostgreSQL schema.
"""

from __future__ import annotations

import json
import time

import pytest
import sqlalchemy as sa

from panda_predictor.db.engine import make_engine
from panda_predictor.messages.publisher import OutgoingMessage, StompPublisher
from panda_predictor.messages.scout_prediction import from_prediction
from tests.message_parts import (
    STOMP_PORT,
    broker_settings,
    build_panda_database,
    drop_database,
    insert_tasks,
    prediction,
    require_broker,
    task,
)
from tests.panda_classes import ensure_panda_classes

pytestmark = pytest.mark.postgres


@pytest.fixture
def panda(tmp_path):
    require_broker()
    name, settings = build_panda_database(tmp_path)
    engine = make_engine(settings)
    yield settings, engine
    engine.dispose()
    drop_database(name)


def test_panda_s_agent_loads_and_runs_the_plugin(panda, tmp_path):
    ensure_panda_classes()
    from pandacommon.pandamsgbkr.msg_processor import MsgProcAgentBase

    settings, engine = panda
    settings = broker_settings(settings)
    config = tmp_path / "predictor.yaml"
    config.write_text(
        f"db_url: {settings.db_url}\ndb_schema: doma_panda\nhome: {tmp_path}\n"
    )
    agent_config = tmp_path / "jedi_msg_proc_config.json"
    agent_config.write_text(
        json.dumps(
            {
                "mb_servers": {
                    "predictor_mb": {
                        "host_port_list": [f"localhost:{STOMP_PORT}"],
                        "use_ssl": False,
                        "username": "guest",
                        "passcode": "guest",
                        "vhost": "/",
                    }
                },
                "queues": {
                    "scout_prediction": {
                        "enable": True,
                        "server": "predictor_mb",
                        "destination": settings.broker_destination,
                    }
                },
                "processors": {
                    "ai_parameter_adjuster": {
                        "enable": True,
                        "module": "panda_predictor.plugins.ai_parameter_adjuster",
                        "name": "AIParameterAdjuster",
                        "n_threads": 1,
                        "in_queue": "scout_prediction",
                        "params": {"config_file": str(config), "writer": "sql"},
                    }
                },
            }
        )
    )
    ids = list(range(1, 21))
    insert_tasks(engine, ids)
    messages = [from_prediction(prediction(i), 600) for i in ids]
    bodies = [
        OutgoingMessage(m.idempotency_key, m.task_id, m.to_json()) for m in messages
    ]
    bodies.append(OutgoingMessage("poison-1", 0, "{not json"))
    agent = MsgProcAgentBase(str(agent_config))
    agent.start()
    try:
        publisher = StompPublisher(settings)
        publisher.publish(bodies)
        publisher.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                n = conn.execute(
                    sa.text("SELECT count(*) FROM doma_panda.pp_message_applied")
                ).scalar()
            if n >= 21:
                break
            time.sleep(0.5)
    finally:
        agent.stop()
        agent.join(30)
    assert n == 21
    assert all(task(engine, i)["splitrule"] == "NG=1,TW=1" for i in ids)
