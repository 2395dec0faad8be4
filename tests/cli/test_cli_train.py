"""``panda-predictor train`` refuses bad training parameters before it trains."""

from __future__ import annotations

from click.testing import CliRunner

from panda_predictor.cli.train import train
from panda_predictor.settings import load_settings


def test_an_unknown_training_parameter_is_named(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("no_such_parameter: 3\n")

    result = CliRunner().invoke(
        train, ["--params", str(params)], obj=load_settings(home=tmp_path)
    )

    assert result.exit_code == 1
    assert result.output.startswith("Error: The training parameters must be among")
    assert "no_such_parameter" in result.output
    assert len(result.output.splitlines()) == 1


def test_the_kind_option_takes_only_the_two_model_kinds(tmp_path):
    result = CliRunner().invoke(
        train, ["--kind", "forest"], obj=load_settings(home=tmp_path)
    )
    assert result.exit_code == 2
    assert "'forest' is not one of 'xgboost', 'keras'" in result.output
