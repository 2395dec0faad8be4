"""``panda-predictor train``: fit both model kinds, report, register, gate."""

from __future__ import annotations

from pathlib import Path

import click

from panda_predictor.cli.options import (
    gate_tolerance_option,
    kind_option,
    params_option,
)
from panda_predictor.settings import Settings


@click.command("train")
@params_option
@kind_option
@click.option(
    "--split",
    type=click.Choice(["time", "stratified"]),
    default=None,
    help="Time-ordered (default) or stratified 85/15 split.",
)
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to write report.md and its plots (default: <home>/reports/train-*).",
)
@click.option(
    "--labels",
    "labels_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Labels written by 'panda-predictor labels' (e.g. on Spark): the job rows "
    "are not read again.",
)
@gate_tolerance_option
@click.option("--no-progress", is_flag=True, help="Hide progress bars.")
@click.pass_obj
def train(
    settings: Settings,
    params_file: str | None,
    kinds: tuple[str, ...],
    split: str | None,
    report_dir: str | None,
    labels_file: Path | None,
    gate_tolerances: tuple[str, ...],
    no_progress: bool,
) -> None:
    """Train the four target models on the database's history and register them.

    Reads the history (tasks, datasets, jobs), builds the scout labels, trains
    XGBoost and Keras classifiers per target on a time-ordered split, tunes the
    tail rules on validation data, writes an evaluation report and logs everything
    to MLflow. The new bundle becomes 'champion' only if it is not worse than the
    current champion on the same test data; otherwise 'challenger'.

    \b
    Examples:
      panda-predictor train --kind xgboost --report-dir var/reports/latest
      panda-predictor train --labels var/labels.parquet
      panda-predictor train --gate-tolerance accuracy=0.02 \\
          --gate-tolerance under_allocation=0.01
    """
    from model_registry.gate import GateThresholds
    from model_registry.replay_table import (
        evidence_replay,
        replay_block,
        with_verdicts,
    )
    from panda_predictor.cli.errors import user_errors
    from panda_predictor.cli.inputs import training_config_from
    from pipelines.retraining.train_and_register import (
        metrics_table,
        train_and_register,
    )
    from pipelines.training.dataset import history_with_labels

    with user_errors():
        config = training_config_from(settings, params_file, kinds, split)
        thresholds = GateThresholds.from_settings(settings, gate_tolerances)
        history = None
        if labels_file is not None:
            history = history_with_labels(settings, labels_file, not no_progress)
        summary = train_and_register(
            settings,
            config,
            progress=not no_progress,
            report_dir=Path(report_dir) if report_dir else None,
            history=history,
            gate_thresholds=thresholds,
        )
    click.echo(
        metrics_table(summary.metrics).to_string(index=False, float_format="%.3f")
    )
    click.echo(
        f"\nmean accuracy {summary.metrics['mean_accuracy']:.3f}, exact match "
        f"{summary.metrics['joint.exact_match_rate']:.3f}; served kinds: "
        + ", ".join(f"{t}={k}" for t, k in summary.served_kinds.items())
    )
    for line in replay_block(
        with_verdicts(evidence_replay(summary.evidence), summary.gate.verdicts)
    ):
        click.echo(line)
    click.echo(
        f"Registered {summary.version.name} version {summary.version.version}: "
        f"{summary.gate.alias} ({summary.gate.reason})"
    )
    for line in summary.gate.table()[1:]:
        click.echo(f"  {line}")
    click.echo(f"Report: {summary.report}")
