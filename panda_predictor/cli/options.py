"""Options shared by the training commands (train, retrain, evaluate)."""

from __future__ import annotations

import click

#: ``--params FILE``: the training parameters YAML.
params_option = click.option(
    "--params",
    "params_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Training parameters YAML (default: pipelines/params/training.yaml).",
)

#: ``--kind xgboost|keras`` (repeatable): the model kinds to train.
kind_option = click.option(
    "--kind",
    "kinds",
    type=click.Choice(["xgboost", "keras"]),
    multiple=True,
    help="Model kind(s) to train; repeat for both (default: both).",
)
