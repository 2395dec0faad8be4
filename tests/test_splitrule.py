"""Parsing and editing PanDA's SPLITRULE, and the prediction dataclasses."""

from __future__ import annotations

import pytest

from panda_predictor.core.splitrule import (
    format_split_rule,
    has_scout_rule,
    parse_split_rule,
    remove_scout_rule,
)
from panda_predictor.core.task_prediction import TargetPrediction, TaskPrediction


@pytest.mark.parametrize(
    ("rule", "parsed"),
    [
        pytest.param("TI=1,US=2,MF=3", {"TI": "1", "US": "2", "MF": "3"}, id="three"),
        pytest.param(" US=3 ,", {"US": "3"}, id="spaces-trailing-comma"),
        pytest.param("", {}, id="empty"),
        pytest.param(None, {}, id="none"),
    ],
)
def test_parse_split_rule(rule, parsed):
    assert parse_split_rule(rule) == parsed
    assert list(parse_split_rule(rule)) == list(parsed)


def test_format_round_trips():
    assert format_split_rule(parse_split_rule("TI=1,US=2,MF=3")) == "TI=1,US=2,MF=3"


@pytest.mark.parametrize(
    ("rule", "has", "removed"),
    [
        pytest.param("TI=1,US=2,MF=3", True, "TI=1,MF=3", id="middle"),
        pytest.param("US=3", True, None, id="only-rule"),
        pytest.param("TI=1,XUS=2", False, "TI=1,XUS=2", id="similar-key"),
        pytest.param(None, False, None, id="none"),
    ],
)
def test_scout_rule(rule, has, removed):
    assert has_scout_rule(rule) is has
    assert remove_scout_rule(rule) == removed


@pytest.mark.parametrize(
    ("rule", "match"),
    [
        pytest.param(
            "TI=1,US", r"KEY=value rules\. Got 'US' in 'TI=1,US'", id="no-equals"
        ),
        pytest.param("=2", r"Got '=2'", id="no-key"),
        pytest.param(12, r"must be a string .*Got 12", id="not-text"),
    ],
)
def test_parse_split_rule_errors(rule, match):
    with pytest.raises(ValueError, match=match):
        parse_split_rule(rule)


def _target(name="ramcount", **fields):
    values = dict(
        target=name,
        class_index=1,
        class_label="1000-2000",
        lower=1000.0,
        upper=2000.0,
        value=2000,
        unit="MBPerCore",
        confidence=0.8,
        probabilities=(0.2, 0.8),
    )
    values.update(fields)
    return TargetPrediction(**values)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        pytest.param(
            lambda: _target(confidence=1.5),
            r"'confidence' field .*Got 1\.5",
            id="confidence",
        ),
        pytest.param(
            lambda: _target(class_index=-1), r"'class_index' field .*Got -1", id="class"
        ),
        pytest.param(
            lambda: TaskPrediction(1, "m", "1", "skip", "r", {}),
            r"'decision' field must be one of .*Got 'skip'",
            id="decision",
        ),
        pytest.param(
            lambda: TaskPrediction("1", "m", "1", "applied", "r", {}),
            r"'jeditaskid' field must be an integer\. Got '1'",
            id="task-id",
        ),
        pytest.param(
            lambda: TaskPrediction(1, "m", "1", "applied", "r", {"cputime": _target()}),
            r"Got 'ramcount' under 'cputime'",
            id="target-key",
        ),
    ],
)
def test_prediction_errors(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_task_prediction_holds_its_targets():
    prediction = TaskPrediction(
        1, "m", "1", "applied", "confident", {"ramcount": _target()}
    )
    assert prediction.targets["ramcount"].value == 2000
    assert prediction.predicted_at is None
