"""The hook refuses task rows the refiner's task definitions refuse (never raises)."""

from __future__ import annotations

import math
import re

import pytest
from test_db_support import add_task, audit_rows, task_row
from test_requested_values import FakePredictor

from panda_predictor.core.domain.task_checks import input_problem
from panda_predictor.hook.submit import SubmitHook
from panda_predictor.taskdef import TaskDefinitionError, read_task_definitions

#: (row fields, the refiner's parameter-map fields, expected message).
INVALID = [
    pytest.param({"corecount": -3}, {"coreCount": -3},
                 r"'corecount' field must be a positive integer\. Got -3 instead",
                 id="negative-cores"),
    pytest.param({"corecount": 0.0}, {"coreCount": 0},
                 r"'corecount' field must be a positive integer\. Got 0 instead",
                 id="zero-cores"),
    pytest.param({"corecount": 2048}, {"coreCount": 2048},
                 r"'corecount' field must be at most 1024\. Got 2048", id="too-many"),
    pytest.param({"nevents_sum": -5.0}, {"nEvents": -5},
                 r"'nevents_sum' field must be a non-negative integer\. Got -5",
                 id="negative-events"),
    pytest.param({"nfiles_sum": -1}, {"nFiles": -1},
                 r"'nfiles_sum' field must be a non-negative integer\. Got -1",
                 id="negative-files"),
]  # fmt: skip


@pytest.mark.parametrize(("row", "definition", "match"), INVALID)
def test_refused_in_both_paths(row, definition, match):
    problem = input_problem({"corecount": 8, **row})
    assert problem is not None and re.search(match, problem)
    # The refiner reads the same task through taskdef, which refuses it too.
    with pytest.raises(TaskDefinitionError, match=r"must be .*Got -?\d+ instead"):
        read_task_definitions({"processingType": "simul", **definition})


@pytest.mark.parametrize(
    "row",
    [
        {"corecount": 8, "nevents_sum": 0, "nfiles_sum": 0, "n_input_datasets": 0},
        {"corecount": None, "nevents_sum": math.nan, "nfiles_sum": None},
        {"corecount": 1024.0, "nevents_sum": 1e6},
    ],
    ids=["zeros", "unknown", "largest"],
)
def test_plausible_rows_pass(row):
    assert input_problem(row) is None


class RecordingPredictor(FakePredictor):
    """Records the task ids the model was asked about."""

    def __init__(self):
        super().__init__({})
        self.seen: list[int] = []

    def predict(self, tasks, history=None):
        self.seen += [int(t) for t in tasks["jeditaskid"]]
        return super().predict(tasks, history)


def test_hook_keeps_scouts_of_invalid_tasks_with_the_reason(db, settings):
    add_task(db, settings, 1, corecount=-3)
    add_task(db, settings, 2, corecount=0)
    add_task(db, settings, 3, datasets=(("input", 10, -5),))
    add_task(db, settings, 4)
    before = {i: task_row(db, settings, i) for i in (1, 2, 3)}
    model = RecordingPredictor()
    hook = SubmitHook(
        settings,
        engine=db,
        predictor_factory=lambda: model,
        history_factory=lambda: None,
    )

    report = hook.run_once()

    assert report.failure is None
    assert model.seen == [4]  # invalid rows never reach the model
    assert report.applied == [4] and sorted(report.kept_scouts) == [1, 2, 3]
    for task_id, row in before.items():
        assert task_row(db, settings, task_id) == row
    audit = audit_rows(db, settings)
    assert audit[1]["reason"] == (
        "invalid task: The 'corecount' field must be a positive integer. "
        "Got -3 instead."
    )
    assert "Got 0 instead" in audit[2]["reason"]
    assert (
        "'nevents_sum' field must be a non-negative integer. Got -5"
        in audit[3]["reason"]
    )
    assert audit[1]["decision"] == "kept_scouts" and audit[1]["written_at"] is None
