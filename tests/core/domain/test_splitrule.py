"""Parsing and editing PanDA's SPLITRULE, and the prediction dataclasses."""

from __future__ import annotations

import pytest

from panda_predictor.core.domain.splitrule import (
    SCOUT_KEY,
    SplitRuleEditError,
    format_split_rule,
    has_scout_rule,
    parse_split_rule,
    remove_scout_rule,
    rule_value,
)
from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction


@pytest.mark.parametrize(
    ("rule", "parsed"),
    [
        pytest.param("TI=1,US=2,MF=3", {"TI": "1", "US": "2", "MF": "3"}, id="three"),
        pytest.param(" US=3 ,", {"US": "3"}, id="spaces-trailing-comma"),
        pytest.param("US=2,PC=1,PC=3", {"US": "2", "PC": "1"}, id="first-wins"),
        pytest.param("", {}, id="empty"),
        pytest.param(None, {}, id="none"),
    ],
)
def test_parse_split_rule(rule, parsed):
    assert parse_split_rule(rule) == parsed
    assert list(parse_split_rule(rule)) == list(parsed)


def test_format_round_trips():
    assert format_split_rule(parse_split_rule("TI=1,US=2,MF=3")) == "TI=1,US=2,MF=3"


#: (SPLITRULE, scouts scheduled as PanDA reads it, the rule after removal).
SCOUT_CASES = [
    pytest.param("TI=1,US=2,MF=3", True, "TI=1,MF=3", id="middle"),
    pytest.param("US=2", True, None, id="only-rule"),
    pytest.param("US=2,PC=1,PC=3", True, "PC=1,PC=3", id="duplicate-kept"),
    pytest.param("PC=1, US=2", True, "PC=1", id="space-before-US"),
    pytest.param("PC=1 ,US=2 ,MF=3", True, "PC=1 ,MF=3", id="spaces-kept"),
    pytest.param("US=,PC=1", False, "US=,PC=1", id="US-without-digits"),
    pytest.param("PC=1,US=", False, "PC=1,US=", id="US-empty-at-end"),
    pytest.param("US=3,MF=1", False, "MF=1", id="requirements-updated"),
    pytest.param("US=1", False, None, id="no-scouts"),
    pytest.param("US=3,US=2", False, None, id="first-US-counts"),
    pytest.param("US=23", False, None, id="other-number"),
    pytest.param("TI=1,XUS=1", False, "TI=1,XUS=1", id="similar-key"),
    pytest.param("NE=10,,US=2", True, "NE=10,", id="empty-item-kept"),
    pytest.param(None, False, None, id="none"),
]


@pytest.mark.parametrize(("rule", "has", "removed"), SCOUT_CASES)
def test_scout_rule(rule, has, removed):
    assert has_scout_rule(rule) is has
    assert remove_scout_rule(rule) == removed


@pytest.fixture(scope="module")
def jedi_task_spec():
    from panda_classes import jedi_task_spec_class

    return jedi_task_spec_class()


@pytest.mark.parametrize(("rule", "has", "removed"), SCOUT_CASES)
def test_scout_rule_is_read_as_panda_reads_it(jedi_task_spec, rule, has, removed):
    """PanDA's own JediTaskSpec agrees before and after the edit, on every rule."""
    before, after = jedi_task_spec(), jedi_task_spec()
    before.splitRule, after.splitRule = rule, remove_scout_rule(rule)

    assert before.useScout() is has_scout_rule(rule) is has
    assert after.useScout() is False
    for name, token in jedi_task_spec.splitRuleToken.items():
        if token == SCOUT_KEY:
            continue
        # Every other rule reads the same, and the same as PanDA reads it.
        assert before.check_split_rule(name) == after.check_split_rule(name), name
        assert rule_value(rule, token) == rule_value(after.splitRule, token)
    assert before.getNumEventsPerJob() == after.getNumEventsPerJob()
    assert before.getMaxNumFilesPerJob() == after.getMaxNumFilesPerJob()


@pytest.mark.parametrize(
    ("rule", "key", "expected"),
    [
        pytest.param("US=2,PC=1,PC=3", "PC", "1", id="first"),
        pytest.param("NE=,NE=5", "NE", "5", id="first-with-digits"),
        pytest.param("MF=x", "MF", None, id="no-digits"),
    ],
)
def test_rule_value_matches_panda(jedi_task_spec, rule, key, expected):
    spec = jedi_task_spec()
    spec.splitRule = rule
    assert rule_value(rule, key) == expected
    if key == "NE":
        assert spec.getNumEventsPerJob() == int(expected)


def test_glued_scout_rule_is_not_removed():
    with pytest.raises(SplitRuleEditError, match=r"'splitRule' field .*Got 'XUS=2'"):
        remove_scout_rule("XUS=2")


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
