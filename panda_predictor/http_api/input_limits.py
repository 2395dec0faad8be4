"""Bounds on what a request may contain, checked before any of it is used.

A fuzz run found bodies and URLs that made the service fail with a 500 instead of a
clear 4xx: JSON nested about 1,000 deep (``RecursionError`` in the parser) and task
ids of 2^63 or more (SQLite's integers overflow). These checks turn each into a 400
or 422 whose description names the field, what was expected and what came.
"""

from __future__ import annotations

import json
import re
from typing import Any

from werkzeug.exceptions import BadRequest, UnprocessableEntity

from panda_predictor.taskdef import MAX_BIGINT

#: Deepest JSON nesting accepted. A task definition needs 4 levels (``{"tasks":
#: [{"inDS": [{...}]}]}``); ``jobParameters`` templates a few more.
MAX_JSON_DEPTH = 32

_DIGITS = re.compile(r"[0-9]{1,19}")


def _shown(text: str) -> str:
    """Return ``text`` quoted, cut to 60 characters (an echo must stay short)."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Return whether ``value`` nests lists and objects deeper than ``limit``.

    Iterative, so the check itself cannot hit the recursion limit it guards against.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend(
            (child, depth + 1) for child in children if isinstance(child, dict | list)
        )
    return False


def parse_json_body(data: bytes) -> Any:
    """Return the parsed JSON ``data``; 400 when malformed or nested too deep."""
    too_deep = BadRequest(
        f"The request body must be JSON nested at most {MAX_JSON_DEPTH} levels deep. "
        "Got deeper nesting instead."
    )
    try:
        body = json.loads(data)
    except RecursionError:
        raise too_deep from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(
            f"The request body must be JSON (a task definition or a list). Got "
            f"malformed JSON instead: {exc}."
        ) from None
    if isinstance(body, dict | list) and json_depth_exceeds(body, MAX_JSON_DEPTH):
        raise too_deep
    return body


def parse_task_id(text: str) -> int:
    """Return the ``jediTaskID`` of a URL as an int in PanDA's range, else 422.

    PanDA's task ids are positive ``bigint`` values (JEDI_TASKS.JEDITASKID). Only
    ASCII digits are accepted: ``int()`` would also take ``"1_000"``, ``" 7 "`` and
    other scripts' digits, which no PanDA tool writes.
    """
    task_id = int(text) if _DIGITS.fullmatch(text) else 0
    if not 1 <= task_id <= MAX_BIGINT:
        raise UnprocessableEntity(
            "The 'jediTaskID' path parameter must be an integer from 1 to "
            f"{MAX_BIGINT}. Got {_shown(text)} instead."
        )
    return task_id
