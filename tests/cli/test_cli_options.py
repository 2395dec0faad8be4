"""The options the training commands share: --params, --kind, --gate-tolerance."""

from __future__ import annotations

import click
from click.testing import CliRunner

from panda_predictor.cli.options import (
    gate_tolerance_option,
    kind_option,
    params_option,
)


@click.command()
@params_option
@kind_option
@gate_tolerance_option
def show(params_file, kinds, gate_tolerances):
    """Echo what the shared options parsed."""
    click.echo(repr((params_file, kinds, gate_tolerances)))


def test_defaults_mean_the_packaged_params_both_kinds_no_tolerance():
    result = CliRunner().invoke(show, [])
    assert result.output.strip() == "(None, (), ())"


def test_kinds_and_tolerances_repeat(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("seed: 1\n")
    args = ["--params", str(params), "--kind", "xgboost", "--kind", "keras"]
    args += ["--gate-tolerance", "accuracy=0.02", "--gate-tolerance", "waste=1"]

    result = CliRunner().invoke(show, args)

    assert result.output.strip() == repr(
        (str(params), ("xgboost", "keras"), ("accuracy=0.02", "waste=1"))
    )


def test_a_missing_params_file_is_refused(tmp_path):
    result = CliRunner().invoke(show, ["--params", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2 and "does not exist" in result.output
