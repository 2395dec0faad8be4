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

#: ``--gate-tolerance NAME=VALUE`` (repeatable): loosen or tighten the champion gate.
gate_tolerance_option = click.option(
    "--gate-tolerance",
    "gate_tolerances",
    multiple=True,
    metavar="NAME=VALUE",
    help="How much worse than the champion (beyond the noise) the new model may "
    "be; NAME is accuracy, tail_recall, under_allocation, delay_share, "
    "floor_noise_factor or waste. Repeatable; overrides the gate_* settings. Example: "
    "--gate-tolerance accuracy=0.02.",
)
