"""Bounds on a request's JSON depth and task ids: clear 4xx instead of a 500."""

from __future__ import annotations

import pytest
from werkzeug.exceptions import BadRequest, UnprocessableEntity

from panda_predictor.http_api.input_limits import (
    MAX_JSON_DEPTH,
    json_depth_exceeds,
    parse_json_body,
    parse_task_id,
)
from panda_predictor.taskdef import MAX_BIGINT


def nested(depth: int):
    value: object = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def test_depth_counts_lists_and_objects():
    assert not json_depth_exceeds(nested(3), 3)
    assert json_depth_exceeds(nested(4), 3)
    assert not json_depth_exceeds({"a": 1, "b": "text"}, 1)


def test_a_body_at_the_limit_parses_one_deeper_is_400():
    import json

    assert parse_json_body(json.dumps(nested(MAX_JSON_DEPTH)).encode()) is not None
    with pytest.raises(BadRequest, match=f"at most {MAX_JSON_DEPTH} levels deep"):
        parse_json_body(json.dumps(nested(MAX_JSON_DEPTH + 1)).encode())


def test_nesting_deeper_than_the_parser_can_go_is_400_not_a_crash():
    with pytest.raises(BadRequest, match="Got deeper nesting instead"):
        parse_json_body(b"[" * 100_000 + b"]" * 100_000)


@pytest.mark.parametrize(
    "data", [b"{not json", b"\xff\xfe", b""], ids=["malformed", "bytes", "empty"]
)
def test_malformed_bodies_are_400(data):
    with pytest.raises(BadRequest, match="Got malformed JSON instead"):
        parse_json_body(data)


def test_task_ids_in_panda_s_range_parse():
    assert parse_task_id("1") == 1
    assert parse_task_id(str(MAX_BIGINT)) == MAX_BIGINT


@pytest.mark.parametrize(
    "text",
    ["0", str(MAX_BIGINT + 1), "1_000", " 7 ", "-3", "٣", "x" * 100],
    ids=["zero", "too-big", "underscore", "spaces", "negative", "arabic", "long"],
)
def test_other_task_ids_are_422_with_a_short_echo(text):
    with pytest.raises(UnprocessableEntity, match="must be an integer from 1") as err:
        parse_task_id(text)
    assert len(err.value.description) < 200
