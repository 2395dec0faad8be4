"""The hook's publish output: what is published, written, and audited per receipt."""

from __future__ import annotations

import dataclasses
import json

import pytest
import sqlalchemy as sa
from test_db_support import audit_rows, make_prediction

from panda_predictor.db.early_remeasure import early_remeasure_table
from panda_predictor.db.engine import make_engine
from panda_predictor.db.messages import get_message_tables
from panda_predictor.db.migrations import init_database
from panda_predictor.db.writer import WriteResult
from panda_predictor.messages.hook_output import LEGACY_MODEL, publish_batch
from panda_predictor.messages.publisher import BrokerUnavailable
from panda_predictor.settings import load_settings


class Publisher:
    """A stand-in broker: confirms every message, or only ``confirm`` of them."""

    def __init__(self, confirm: int | None = None) -> None:
        self.confirm = confirm
        self.sent: list = []

    def publish(self, outgoing):
        self.sent.extend(outgoing)
        receipts = {m.key: f"receipt-{m.task_id}" for m in outgoing}
        if self.confirm is None:
            return receipts
        done = dict(list(receipts.items())[: self.confirm])
        raise BrokerUnavailable("no receipt in time", done)


class Writer:
    """The database output's stand-in: records what it was given to write."""

    def __init__(self) -> None:
        self.given: list[int] = []

    def __call__(self, predictions):
        self.given.extend(p.jeditaskid for p in predictions)
        result = WriteResult()
        result.applied.extend(
            p.jeditaskid for p in predictions if p.decision == "applied"
        )
        result.shadow.extend(
            p.jeditaskid for p in predictions if p.decision == "shadow"
        )
        return result, []


def _world(tmp_path, output):
    settings = load_settings(home=tmp_path, output=output)
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    return settings, engine


def _published(engine, settings):
    table = get_message_tables(settings, engine).published
    with engine.connect() as conn:
        return sorted(conn.execute(sa.select(table.c.jeditaskid)).scalars())


def test_publish_sends_decided_tasks_once_and_writes_only_the_rest(tmp_path):
    settings, engine = _world(tmp_path, "publish")
    batch = [
        make_prediction(1),
        make_prediction(1),  # twice in one batch: published once
        make_prediction(2, decision="kept_scouts", reason="not confident"),
        make_prediction(3, decision="shadow"),
        dataclasses.replace(make_prediction(4), model_name=LEGACY_MODEL),
    ]
    publisher, writer = Publisher(), Writer()

    result, failures = publish_batch(settings, engine, publisher, batch, writer)

    assert sorted(m.task_id for m in publisher.sent) == [1, 2]
    assert writer.given == [3, 4]  # shadow and the kill switch's: the database output
    assert (sorted(result.applied), result.kept_scouts, failures) == ([1, 4], [2], [])
    assert _published(engine, settings) == [1, 2]
    assert set(audit_rows(engine, settings)) == {
        1,
        2,
    }  # the writer stand-in audits none
    engine.dispose()


def test_publish_asks_for_the_early_remeasurement_and_leaves_the_mark_to_jedi(
    tmp_path,
):
    settings, engine = _world(tmp_path, "publish")
    early = dataclasses.replace(make_prediction(1), early_remeasure=True)
    publisher = Publisher()

    publish_batch(settings, engine, publisher, [early, make_prediction(2)], Writer())

    bodies = {m.task_id: json.loads(m.body) for m in publisher.sent}
    assert bodies[1]["early_remeasure"] is True
    assert "early_remeasure" not in bodies[2]
    # JEDI writes the task, so JEDI's plugin marks it once it applied the message.
    table = early_remeasure_table(settings.plugin_schema_for("sqlite"))
    with engine.connect() as conn:
        assert conn.execute(sa.select(table)).all() == []
    engine.dispose()


def test_without_a_receipt_a_task_stays_unaudited_and_the_pass_fails(tmp_path):
    settings, engine = _world(tmp_path, "publish")
    batch = [make_prediction(1), make_prediction(2)]

    with pytest.raises(BrokerUnavailable, match="no receipt"):
        publish_batch(settings, engine, Publisher(confirm=1), batch, Writer())

    assert len(_published(engine, settings)) == 1
    assert len(audit_rows(engine, settings)) == 1  # the other is published next pass
    engine.dispose()


def test_both_publishes_only_what_the_database_output_audited(tmp_path):
    settings, engine = _world(tmp_path, "both")
    batch = [make_prediction(1), make_prediction(2, decision="shadow")]
    publisher, writer = Publisher(), Writer()

    result, _ = publish_batch(settings, engine, publisher, batch, writer)

    assert writer.given == [1, 2]
    assert [m.task_id for m in publisher.sent] == [1]
    assert _published(engine, settings) == [1]
    assert audit_rows(engine, settings) == {}  # the database output audits in "both"
    assert result.applied == [1] and result.shadow == [2]
    engine.dispose()
