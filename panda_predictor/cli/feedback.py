"""``panda-predictor feedback``: fill the outcome table and print weekly figures."""

from __future__ import annotations

from datetime import datetime

import click

from panda_predictor.settings import Settings


@click.command("feedback")
@click.option(
    "--since",
    type=click.DateTime(),
    default=None,
    help="Only predictions made at or after this time (default: all).",
)
@click.option(
    "--until",
    type=click.DateTime(),
    default=None,
    help="Only predictions made before this time.",
)
@click.option(
    "--first-jobs",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Finished jobs per task the truth is measured on.",
)
@click.option(
    "--weeks",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Print the last this many ISO weeks.",
)
@click.pass_obj
def feedback(
    settings: Settings,
    since: datetime | None,
    until: datetime | None,
    first_jobs: int,
    weeks: int,
) -> None:
    """Compare the written predictions with what the tasks' jobs really needed.

    For every task in the prediction audit whose jobs reached JOBSARCHIVED4, measures
    the truth with the scout formulas on its first finished jobs, counts jobs that
    failed for lack of memory or time and memory requested but unused, stores the
    result in pp_task_outcome and prints, per target and ISO week: accuracy,
    under-allocation, over-allocation, share decided without scouts.

    \b
    Example:
      panda-predictor feedback --since 2025-01-01
    """
    from panda_predictor.cli.errors import user_errors
    from panda_predictor.core.feedback import OutcomeParams
    from pipelines.feedback import run_feedback

    with user_errors():
        run = run_feedback(settings, since, until, OutcomeParams(first_jobs=first_jobs))
    click.echo(f"{run.audited} audited tasks, {run.written} outcome rows written.")
    weekly = run.weekly
    if weekly.empty:
        click.echo("No outcomes yet: predicted tasks have no jobs in JOBSARCHIVED4.")
        return
    last = sorted(weekly["week"].unique())[-weeks:]
    shown = weekly[weekly["week"].isin(last)]
    click.echo(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
