"""Task definitions (our or PanDA parameter-map names) -> the predictor's frame."""

from __future__ import annotations

import math

import pytest

from panda_predictor.core.features.pipeline import TASK_COLUMNS
from panda_predictor.taskdef import (
    MAX_TASKS,
    TaskDefinitionError,
    parse_task_definitions,
    read_task_definitions,
)

PANDA_MAP = {
    "taskName": "mc23_13p6TeV.801234.Py8EG_A14.simul.e8514_s4162",
    "vo": "atlas",
    "processingType": "simul",
    "taskType": "prod",
    "prodSourceLabel": "managed",
    "transPath": "Sim_tf.py",
    "transHome": "AtlasOffline-23.0.5",
    "transUses": "Atlas-23.0.5",
    "architecture": "x86_64-el9-gcc13-opt",
    "coreCount": 8,
    "workingGroup": "AP_MCGN",
    "campaign": "MC23a",
    "userName": "atlas-prod",
    "nEventsPerJob": 1000,
    "log": {"dataset": "mc23.log", "type": "template"},
    "jobParameters": [
        {"type": "template", "param_type": "input", "dataset": "mc23.EVNT"},
        {"type": "template", "param_type": "output", "dataset": "mc23.HITS"},
    ],
}


def test_panda_parameter_map_becomes_one_row_of_task_columns():
    frame = read_task_definitions(PANDA_MAP)
    assert list(frame.columns) == list(TASK_COLUMNS)
    row = frame.iloc[0]
    assert row["processingtype"] == "simul"
    assert row["transpath"] == "Sim_tf.py"
    assert row["transhome"] == "AtlasOffline-23.0.5"
    assert row["corecount"] == 8.0
    assert row["username"] == "atlas-prod"
    # One input template in jobParameters; counts unknown before JEDI fills them.
    assert row["n_input_datasets"] == 1.0
    assert math.isnan(row["nfiles_sum"]) and math.isnan(row["nevents_sum"])


def test_our_names_and_totals_are_accepted():
    frame = read_task_definitions(
        {
            "processingtype": "merge",
            "corecount": 1,
            "nfiles_sum": 20,
            "nevents_sum": 5000,
            "jeditaskid": 42,
        }
    )
    row = frame.iloc[0]
    assert row["jeditaskid"] == 42
    assert (row["nfiles_sum"], row["nevents_sum"]) == (20.0, 5000.0)


def test_input_datasets_are_counted_and_summed():
    frame = read_task_definitions(
        {
            "inDS": [
                "a.EVNT",
                {"name": "b.EVNT", "nFiles": 3, "nEvents": 300},
                {"datasetName": "c.EVNT", "nFiles": 2},
            ]
        }
    )
    row = frame.iloc[0]
    assert row["n_input_datasets"] == 3.0
    assert row["nfiles_sum"] == 5.0
    assert row["nevents_sum"] == 300.0


def test_comma_separated_in_ds_string_counts_datasets():
    frame = read_task_definitions({"inDS": "a.EVNT, b.EVNT"})
    assert frame.iloc[0]["n_input_datasets"] == 2.0


def test_a_list_gives_one_row_per_task_with_positions_as_ids():
    frame = read_task_definitions([{"coreCount": 1}, {"coreCount": 8}])
    assert frame["jeditaskid"].tolist() == [0, 1]
    assert frame["corecount"].tolist() == [1.0, 8.0]


def test_creation_date_is_kept_and_made_naive_utc():
    frame = read_task_definitions({"creationDate": "2026-01-02T03:04:05+01:00"})
    assert str(frame.iloc[0]["creationdate"]) == "2026-01-02 02:04:05"


@pytest.mark.parametrize(
    ("data", "field", "match"),
    [
        ({"coreCont": 8}, "coreCont", r"The 'coreCont' field must be a known task"),
        (
            {"coreCount": -3},
            "coreCount",
            r"The 'coreCount' field must be a positive integer\. Got -3 instead\.",
        ),
        (
            {"coreCount": "eight"},
            "coreCount",
            r"The 'coreCount' field must be an integer\. Got 'eight' instead\.",
        ),
        ({"coreCount": True}, "coreCount", r"'coreCount' field must be an integer"),
        ({"transPath": 5}, "transPath", r"'transPath' field must be a string"),
        ({"nFiles": -1}, "nFiles", r"'nFiles' field must be a non-negative integer"),
        (
            {"inDS": [{"nEvents": -5}]},
            "inDS.0.nEvents",
            r"'inDS\.0\.nEvents' field must be a non-negative integer",
        ),
        ({"inDS": [7]}, "inDS.0", r"'inDS\.0' field must be an object"),
        (
            {"processingType": "x" * 65},
            "processingType",
            r"'processingType' field must be a string of at most 64 characters",
        ),
        ({"coreCount": 2, "corecount": 2}, "corecount", r"given once"),
        ({"creationDate": "yesterday"}, "creationDate", r"ISO 8601"),
        ([], "tasks", r"non-empty list"),
        ("simul", "task", r"'task' field must be an object.*Got str"),
        (
            [{"coreCount": 1}, {"coreCount": 0}],
            "coreCount",
            r"'coreCount' field of task 1 must be a positive integer",
        ),
    ],
    ids=[
        "unknown-field",
        "negative-corecount",
        "wrong-type",
        "bool-corecount",
        "number-for-text",
        "negative-nfiles",
        "negative-dataset-events",
        "dataset-not-object",
        "too-long",
        "duplicate-name",
        "bad-date",
        "empty-list",
        "not-an-object",
        "second-task-bad",
    ],
)
def test_invalid_definitions_name_the_field(data, field, match):
    with pytest.raises(TaskDefinitionError, match=match) as info:
        parse_task_definitions(data)
    assert info.value.field == field


def test_too_many_tasks_are_refused():
    with pytest.raises(TaskDefinitionError, match=rf"at most {MAX_TASKS} task"):
        parse_task_definitions([{}] * (MAX_TASKS + 1))
