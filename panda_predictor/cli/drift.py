"""``panda-predictor drift``: compare recent tasks and feedback with the champion."""

from __future__ import annotations

import sys
from datetime import datetime

import click

from panda_predictor.settings import Settings


@click.command("drift")
@click.option(
    "--since",
    type=click.DateTime(),
    default=None,
    help="Start of the window of task creation (default: --days before).",
)
@click.option(
    "--until",
    type=click.DateTime(),
    default=None,
    help="End of the window (default: now).",
)
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Length of the default window.",
)
@click.option(
    "--feedback-days",
    type=click.IntRange(min=1),
    default=28,
    show_default=True,
    help="Sliding window of feedback outcomes.",
)
@click.option(
    "--no-classes",
    is_flag=True,
    help="Skip the predicted-class distribution (no model run).",
)
@click.pass_obj
def drift(
    settings: Settings,
    since: datetime | None,
    until: datetime | None,
    days: int,
    feedback_days: int,
    no_classes: bool,
) -> None:
    """Check recent submissions and feedback for drift from the champion's training.

    Per feature: population stability index and share of categories never seen in
    training; per target: PSI of the predicted classes and feedback accuracy and
    under-allocation against the model's test figures. Logs a run in the MLflow
    experiment 'panda-predictor-monitoring', sets Prometheus gauges and writes
    <home>/monitoring/drift-*.json.

    \b
    Exit codes: 0 no drift, 3 drift detected, 1 error (cron or an alert can act).
    Example:
      panda-predictor drift --days 14 || panda-predictor retrain
    """
    from panda_predictor.cli.errors import user_errors
    from pipelines.drift import DRIFT_EXIT_CODE, check_drift

    with user_errors():
        run = check_drift(
            settings, since, until, days, feedback_days, classify=not no_classes
        )
    result = run.result
    click.echo(
        f"Window {run.since:%Y-%m-%d %H:%M} .. {run.until:%Y-%m-%d %H:%M}: "
        f"{result.n_tasks} tasks, champion version {run.model_version}."
    )
    for f in result.features:
        flag = "  DRIFT" if f.drifted else ""
        click.echo(
            f"  {f.feature:18s} PSI {f.psi:7.3f}  unseen {f.unseen_share:6.3f}{flag}"
        )
    for target, value in result.classes.items():
        click.echo(f"  predicted {target:12s} PSI {value:7.3f}")
    for p in result.performance:
        if p.n:
            click.echo(
                f"  feedback {p.target:12s} accuracy {p.accuracy:.3f} "
                f"(test {p.test_accuracy:.3f}), under-allocation "
                f"{p.under_allocation:.3f} (test {p.test_under_allocation:.3f})"
            )
    if result.drifted:
        click.echo("Drift detected: " + "; ".join(result.reasons))
        sys.exit(DRIFT_EXIT_CODE)
    click.echo("No drift detected.")
