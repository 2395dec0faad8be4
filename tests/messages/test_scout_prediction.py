"""The scout_prediction message: one model, its JSON Schema file, the doc's example."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from panda_predictor.messages.scout_prediction import (
    MessageError,
    from_prediction,
    json_schema_text,
    parse_message,
)
from panda_predictor.resources import read_text
from tests.message_parts import prediction

ROOT = Path(__file__).resolve().parents[2]


def test_the_schema_file_is_generated_from_the_model():
    assert read_text("scout_prediction.schema.json") == json_schema_text()


def test_the_doc_shows_the_schema_file_and_a_valid_example():
    doc = (ROOT / "docs" / "scout-prediction-message.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", doc, re.S)
    assert json.loads(blocks[-1]) == json.loads(json_schema_text())
    example = parse_message(blocks[0])
    assert example.msg_type == "scout_prediction"


def test_a_prediction_round_trips_with_panda_names_and_units():
    message = from_prediction(prediction(42, cpu=4.2), ttl_seconds=600)
    body = json.loads(message.to_json())
    # JEDI_TASKS' cputime goes in whole HS06sPerEvent, rounded up (4.2 -> 5):
    # PanDA's re-measurement keeps the unit of the task parameters, never milli.
    assert body["values"] == {
        "ramCount": 2600,
        "ramUnit": "MBPerCore",
        "cpuTime": 5,
        "cpuTimeUnit": "HS06sPerEvent",
        "ioIntensity": 300,
        "ioIntensityUnit": "kBPerS",
        "walltime": 20,
        "walltimeUnit": "kSI2kseconds",
    }
    assert parse_message(message.to_json()) == message
    assert not message.expired()


def test_the_same_content_gives_the_same_key():
    first = from_prediction(prediction(42), ttl_seconds=600)
    again = from_prediction(prediction(42), ttl_seconds=600)
    other = from_prediction(prediction(42, ram=3000), ttl_seconds=600)
    assert first.idempotency_key == again.idempotency_key
    assert first.idempotency_key != other.idempotency_key


def _body(**changes):
    body = json.loads(from_prediction(prediction(42), ttl_seconds=600).to_json())
    for path, value in changes.items():
        where = body
        *parents, last = path.split("__")
        for name in parents:
            where = where[name]
        if value is None:
            where.pop(last)
        else:
            where[last] = value
    return json.dumps(body)


@pytest.mark.parametrize(
    ("body", "match", "task_id"),
    [
        ("{not json", "must be JSON", None),
        ("[1, 2]", "must be a JSON object", None),
        (_body(msg_type="test"), "msg_type", 42),
        (_body(schema_version="2.0"), "schema_version", 42),
        (_body(values__ramUnit="GB"), "ramUnit", 42),
        (_body(values__ramUnit=None), "given together", 42),
        (_body(values__cpuTime=-5), "cpuTime", 42),
        (_body(expires_at="2020-01-01T00:00:00"), "time zone", 42),
        (_body(confidence__ramCount=1.5), "confidence", 42),
        (_body(task_id="abc"), "task_id", None),
    ],
    ids=[
        "not-json",
        "not-object",
        "msg-type",
        "major-version",
        "wrong-unit",
        "value-without-unit",
        "negative",
        "naive-time",
        "probability",
        "task-id",
    ],
)
def test_a_bad_message_is_refused_with_its_task_id(body, match, task_id):
    with pytest.raises(MessageError, match=match) as caught:
        parse_message(body)
    assert caught.value.task_id == task_id


def test_the_early_remeasurement_is_sent_only_when_asked_and_keys_the_message():
    plain = from_prediction(prediction(42), ttl_seconds=600)
    early = from_prediction(prediction(42, early_remeasure=True), ttl_seconds=600)
    # A message that does not ask reads as version 1.0 did: no field, same key.
    assert "early_remeasure" not in json.loads(plain.to_json())
    assert json.loads(early.to_json())["early_remeasure"] is True
    assert parse_message(early.to_json()).early_remeasure
    assert early.idempotency_key != plain.idempotency_key
    # A kept task's scouts run and are measured anyway: nothing to ask.
    kept = prediction(42, decision="kept_scouts", early_remeasure=True)
    assert not from_prediction(kept, ttl_seconds=600).early_remeasure


def test_an_early_remeasurement_on_a_kept_task_is_refused_by_name():
    body = json.loads(
        from_prediction(prediction(42, decision="kept_scouts"), 600).to_json()
    )
    body["early_remeasure"] = True
    with pytest.raises(MessageError, match="early_remeasure must be false") as err:
        parse_message(json.dumps(body))
    assert err.value.task_id == 42
