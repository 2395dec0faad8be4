"""``panda-predictor evaluate`` checks the parameter file before reading history."""

from __future__ import annotations

from click.testing import CliRunner

from panda_predictor.cli.evaluate import evaluate
from panda_predictor.settings import load_settings


def test_a_parameter_file_that_is_no_mapping_is_one_error_line(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("- a\n- b\n")

    result = CliRunner().invoke(
        evaluate, ["--params", str(params)], obj=load_settings(home=tmp_path)
    )

    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"Error: The parameter file {str(params)!r} must hold a mapping. "
        "Got list instead."
    ]
    assert not (tmp_path / "reports").exists()  # nothing was evaluated
