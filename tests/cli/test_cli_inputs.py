"""The inputs the commands share: task files, --bundle folders, --params files."""

from __future__ import annotations

import pytest

from panda_predictor.cli.inputs import (
    predictor_for,
    read_definitions_file,
    training_config_from,
)
from panda_predictor.errors import UserInputError
from panda_predictor.settings import load_settings


def test_json_yaml_and_stdin_give_the_same_definitions(tmp_path):
    (tmp_path / "t.json").write_text('[{"coreCount": 8}]')
    (tmp_path / "t.yml").write_text("- coreCount: 8\n")
    expected = [{"coreCount": 8}]
    assert read_definitions_file(str(tmp_path / "t.json")) == expected
    assert read_definitions_file(str(tmp_path / "t.yml")) == expected
    assert read_definitions_file("-", '[{"coreCount": 8}]') == expected
    assert read_definitions_file("-", "- coreCount: 8\n") == expected


@pytest.mark.parametrize(
    "name, text, match",
    [
        ("t.txt", "[]", "must end in .json, .yaml or .yml"),
        ("missing.json", None, "must exist. It does not"),
        ("t.json", "{not json", "must hold JSON. Got a parse error"),
        ("t.yaml", "a: [b", "must hold YAML. Got a parse error"),
    ],
    ids=["suffix", "missing", "bad-json", "bad-yaml"],
)
def test_bad_task_files_are_user_errors(tmp_path, name, text, match):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(UserInputError, match=match):
        read_definitions_file(str(path))


def test_a_bundle_folder_that_does_not_load_is_a_user_error(tmp_path):
    with pytest.raises(UserInputError, match="must hold a consistent bundle"):
        predictor_for(load_settings(home=tmp_path), str(tmp_path))


def test_the_command_line_kinds_win_over_the_params_file(tmp_path):
    config = training_config_from(load_settings(home=tmp_path), None, ("xgboost",))
    assert tuple(config.model_kinds) == ("xgboost",)


def test_bad_params_are_user_errors(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("- not a mapping\n")
    with pytest.raises(UserInputError, match="must hold a mapping"):
        training_config_from(load_settings(home=tmp_path), str(params))
