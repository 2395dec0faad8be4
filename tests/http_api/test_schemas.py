"""The request and response shapes of the HTTP API."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from panda_predictor.http_api.results import prediction_dict
from panda_predictor.http_api.schemas import (
    HookOut,
    PredictionOut,
    parse_prediction_request,
)
from panda_predictor.taskdef import TaskDefinitionError
from tests.message_parts import prediction

TASK = {"processingType": "simul", "coreCount": 8, "transPath": "Sim_tf.py"}


def test_one_definition_a_list_and_a_tasks_wrapper_parse_alike():
    one = parse_prediction_request(TASK)
    assert len(one) == 1
    assert parse_prediction_request([TASK, TASK]) == one * 2
    assert parse_prediction_request({"tasks": [TASK]}) == one


@pytest.mark.parametrize(
    "body, match",
    [
        ({"tasks": TASK}, "The 'tasks' field must be a list of task definitions"),
        ({"tasks": []}, "non-empty list"),
        ([], "non-empty list"),
    ],
    ids=["tasks-not-a-list", "tasks-empty", "empty-list"],
)
def test_bad_bodies_name_the_field(body, match):
    with pytest.raises(TaskDefinitionError, match=match):
        parse_prediction_request(body)


def test_response_models_refuse_fields_they_do_not_declare():
    answer = {
        "jediTaskID": 1,
        "written": False,
        "outcome": "shadow",
        "prediction": None,
    }
    assert HookOut.model_validate(answer).model_dump() == answer
    with pytest.raises(ValidationError, match="surprise\n  Extra inputs are not"):
        HookOut.model_validate(answer | {"surprise": 1})


@pytest.mark.parametrize("early", [True, False])
def test_an_answer_says_whether_panda_should_re_measure_the_task_early(early):
    # A caller that writes the values itself must ask PanDA as the hook does.
    answer = prediction_dict(prediction(7, early_remeasure=early))
    assert answer["early_remeasure"] is early
    assert PredictionOut.model_validate(answer).early_remeasure is early
