"""Only errors in what the user gave become one CLI line; any other error is a bug.

A user error (a file, an option, a setting, a task definition) exits with one
``Error:`` line; an internal ``ValueError`` keeps its traceback (``result.exception``
is the error itself, not a ``SystemExit`` with a tidy message), so a bug is never
dressed up as bad input (STYLE.md point 6).
"""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from model_registry.registry import NoChampionError, RegistryError
from panda_predictor.bins_file import BinsFileError
from panda_predictor.cli import main
from panda_predictor.cli.errors import user_errors
from panda_predictor.db.engine import DatabaseError
from panda_predictor.errors import OptionError, UserFixableError, UserInputError
from panda_predictor.metrics import MetricsOptionError
from panda_predictor.settings import SettingsError
from panda_predictor.taskdef import TaskDefinitionError
from pipelines.export import ExportMismatch


@pytest.fixture
def env(tmp_path):
    """Return an environment with the embedded default under ``tmp_path``."""
    return {
        "PANDA_PREDICTOR_HOME": str(tmp_path),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "PANDA_PREDICTOR_CONFIG": "",
    }


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(UserInputError("bad option"), id="user-input"),
        pytest.param(SettingsError("bad setting"), id="settings"),
        pytest.param(BinsFileError("bad bins"), id="bins-file"),
        pytest.param(TaskDefinitionError("bad task"), id="task-definition"),
        pytest.param(FileNotFoundError("no file"), id="missing-file"),
        pytest.param(DatabaseError("no database"), id="database"),
        pytest.param(NoChampionError("no champion"), id="registry"),
        pytest.param(ExportMismatch("run the export again"), id="export-mismatch"),
    ],
)
def test_user_errors_become_one_click_line(error):
    with pytest.raises(click.ClickException, match=str(error)) as info, user_errors():
        raise error
    assert info.value.__suppress_context__
    assert not isinstance(info.value, click.UsageError)
    assert info.value.exit_code == 1


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(OptionError("bad option"), id="option"),
        pytest.param(MetricsOptionError("bad metrics port"), id="metrics-option"),
    ],
)
def test_option_errors_exit_2_like_clicks_own(error):
    with pytest.raises(click.UsageError, match=str(error)) as info, user_errors():
        raise error
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(ValueError("boom"), id="value-error"),
        pytest.param(KeyError("boom"), id="key-error"),
        pytest.param(TypeError("boom"), id="type-error"),
    ],
)
def test_other_errors_pass_through_unchanged(error):
    with pytest.raises(type(error)) as info, user_errors():
        raise error
    assert info.value is error


def test_user_input_errors_are_value_errors():
    """``pytest.raises(ValueError)`` and callers catching ValueError keep working."""
    for cls in (
        UserInputError,
        SettingsError,
        BinsFileError,
        TaskDefinitionError,
        MetricsOptionError,
    ):
        assert issubclass(cls, UserInputError) and issubclass(cls, ValueError)
    assert issubclass(NoChampionError, RegistryError)


def test_service_errors_are_user_fixable_but_no_value_errors():
    """The CLI finds them by their base; code catching bad values must not."""
    for cls in (DatabaseError, RegistryError, ExportMismatch):
        assert issubclass(cls, UserFixableError) and issubclass(cls, RuntimeError)
        assert not issubclass(cls, ValueError)


def _one_error_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    ("command", "content", "match"),
    [
        pytest.param(
            "train", "- a\n- b\n", "must hold a mapping. Got list", id="train-list"
        ),
        pytest.param(
            "train", "epochs: 3\n", "The training parameters must be among", id="key"
        ),
        pytest.param(
            "evaluate", "model_kinds: [xgboost\n", "must hold YAML", id="evaluate-yaml"
        ),
        pytest.param(
            "retrain", "- 1\n", "must hold a mapping. Got list", id="retrain-list"
        ),
    ],
)
def test_bad_params_file_is_one_line_and_exit_1(env, tmp_path, command, content, match):
    params = tmp_path / "params.yaml"
    params.write_text(content)
    result = CliRunner().invoke(main, [command, "--params", str(params)], env=env)
    assert result.exit_code == 1
    assert match in _one_error_line(result)


def test_bad_config_file_is_one_line_and_exit_1(env, tmp_path):
    config = tmp_path / "pp.yaml"
    config.write_text("db_url: [unclosed\n")
    result = CliRunner().invoke(main, ["--config", str(config), "report"], env=env)
    assert result.exit_code == 1
    assert "must hold YAML" in _one_error_line(result)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param(["task.txt"], "must end in .json, .yaml or .yml", id="suffix"),
        pytest.param(["list.json"], "one task definition (an object)", id="a-list"),
        pytest.param(
            ["task.json", "--core-power", "0"], "'core_power' field", id="core-power"
        ),
    ],
)
def test_htcondor_user_errors_are_one_line(
    env, tmp_path, trained_bundle_dir, args, match
):
    (tmp_path / "task.txt").write_text("{}")
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "task.json").write_text(
        json.dumps({"processingType": "simul", "coreCount": 8})
    )
    args = [str(tmp_path / args[0]), *args[1:], "--bundle", str(trained_bundle_dir)]
    result = CliRunner().invoke(main, ["htcondor", *args], env=env)
    assert result.exit_code == 1
    assert match in _one_error_line(result)


def test_a_broken_bundle_folder_is_one_line(env, tmp_path):
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "bundle.json").write_text(json.dumps({"format": -1}))
    task = tmp_path / "task.json"
    task.write_text(json.dumps({"processingType": "simul"}))
    result = CliRunner().invoke(
        main, ["predict", str(task), "--bundle", str(folder)], env=env
    )
    assert result.exit_code == 1
    assert "--bundle folder" in _one_error_line(result)


@pytest.mark.parametrize(
    ("module", "name", "args"),
    [
        pytest.param(
            "pipelines.monitoring.report", "render_report", ["report"], id="report"
        ),
        pytest.param(
            "panda_predictor.taskdef",
            "parse_task_definitions",
            ["predict", "{task}"],
            id="predict",
        ),
        pytest.param(
            "pipelines.retraining.train_and_register",
            "train_and_register",
            ["train"],
            id="train",
        ),
    ],
)
def test_an_internal_value_error_keeps_its_traceback(
    env, tmp_path, monkeypatch, module, name, args
):
    import importlib

    def boom(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(importlib.import_module(module), name, boom)
    task = tmp_path / "task.json"
    task.write_text(json.dumps({"processingType": "simul"}))
    args = [a.replace("{task}", str(task)) for a in args]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 1
    assert isinstance(result.exception, ValueError), result.output
    assert str(result.exception) == "boom"
    assert "Error: boom" not in result.output
