"""The main job through the command line: train, hook, demo (CliRunner, real stores)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from panda_predictor.cli import main

FAST_PARAMS = """\
model_kinds: [xgboost]
xgboost: {n_estimators: 40, early_stopping_rounds: 5}
"""


def env_for(settings) -> dict[str, str]:
    return {
        "PANDA_PREDICTOR_HOME": str(settings.home),
        "PANDA_PREDICTOR_DB_URL": settings.database_url(),
        "MLFLOW_TRACKING_URI": settings.tracking_uri(),
    }


@pytest.fixture
def params_file(tmp_path):
    path = tmp_path / "training.yaml"
    path.write_text(FAST_PARAMS)
    return path


def test_train_registers_a_champion_then_the_hook_uses_it(fresh_sqlite, params_file):
    runner = CliRunner()
    env = env_for(fresh_sqlite)
    trained = runner.invoke(
        main, ["train", "--params", str(params_file), "--no-progress"], env=env
    )
    assert trained.exit_code == 0, trained.output
    assert "Registered panda-predictor version 1: champion" in trained.output
    assert "ramcount" in trained.output and "Report:" in trained.output

    dry = runner.invoke(main, ["hook", "--dry-run"], env=env)
    assert dry.exit_code == 0, dry.output
    assert "Dry run: 30 tasks predicted, nothing written." in dry.output

    evaluated = runner.invoke(
        main,
        ["evaluate", "--report-dir", str(fresh_sqlite.home / "ev"), "--no-progress"],
        env=env,
    )
    assert evaluated.exit_code == 0, evaluated.output
    report = (fresh_sqlite.home / "ev" / "report.md").read_text()
    assert "panda-predictor v1" in report and "ramcount" in report

    once = runner.invoke(main, ["hook", "--once"], env=env)
    assert once.exit_code == 0, once.output
    assert "applied" in once.output and "kept scouts" in once.output

    again = runner.invoke(
        main, ["train", "--params", str(params_file), "--no-progress"], env=env
    )
    assert again.exit_code == 0, again.output
    assert "Registered panda-predictor version 2: " in again.output


def test_train_on_an_empty_database_says_what_to_do(tmp_path, params_file):
    env = {
        "PANDA_PREDICTOR_HOME": str(tmp_path),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    runner = CliRunner()
    assert (
        runner.invoke(main, ["db", "init", "--with-panda-tables"], env=env).exit_code
        == 0
    )
    result = runner.invoke(main, ["train", "--params", str(params_file)], env=env)
    assert result.exit_code == 1
    assert "panda-predictor simulate" in result.output
    assert "Traceback" not in result.output


def test_hook_without_a_model_fails_open_with_exit_3(tmp_path):
    env = {
        "PANDA_PREDICTOR_HOME": str(tmp_path),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    result = CliRunner().invoke(main, ["hook", "--once"], env=env)
    assert result.exit_code == 3
    assert "No champion model" in result.output


@pytest.mark.parametrize(
    "command", ["train", "hook", "demo", "db", "simulate", "labels", "evaluate"]
)
def test_every_command_has_help_with_an_example(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output and len(result.output.splitlines()) > 8


def test_demo_runs_end_to_end(tmp_path):
    env = {"PANDA_PREDICTOR_HOME": str(tmp_path / "var")}
    result = CliRunner().invoke(
        main, ["demo", "--tasks", "1500", "--defined", "12", "--no-progress"], env=env
    )
    assert result.exit_code == 0, result.output
    assert "What the submit hook wrote" in result.output
    assert "every decision is in pp_prediction_audit" in result.output
    assert (tmp_path / "var" / "panda.sqlite").is_file()
    assert (tmp_path / "var" / "mlflow.db").is_file()
