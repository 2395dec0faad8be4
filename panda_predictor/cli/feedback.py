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
@click.option(
    "--what-if",
    is_flag=True,
    help="Also print what shadow and held-back tasks would have got: failures "
    "avoided or caused, scout hours saved, unused memory.",
)
@click.pass_obj
def feedback(
    settings: Settings,
    since: datetime | None,
    until: datetime | None,
    first_jobs: int,
    weeks: int,
    what_if: bool,
) -> None:
    """Compare the written predictions with what the tasks' jobs really needed.

    For every task in the prediction audit whose jobs reached JOBSARCHIVED4, measures
    the truth with the scout formulas on its first finished jobs, counts jobs that
    failed for lack of memory or time and memory requested but unused, stores the
    result in pp_task_outcome and prints, per target and ISO week: accuracy,
    under-allocation, over-allocation, share decided without scouts. Then, per
    decision (applied, held_back, shadow, kept_scouts), the failed jobs and unused
    memory, so the rollout's groups compare side by side. With --what-if, the
    shadow and held-back tasks the model would have applied: jobs at risk from
    under-allocation, failed jobs avoided, scout hours saved, unused memory.

    \b
    Examples:
      panda-predictor feedback --since 2025-01-01
      panda-predictor feedback --what-if
    """
    from panda_predictor.cli.errors import user_errors
    from panda_predictor.core.assess.feedback import OutcomeParams
    from pipelines.monitoring.feedback import run_feedback

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
    click.echo("\nBy decision (applied vs held_back: the rollout's two groups):")
    click.echo(
        run.by_decision.to_string(
            index=False, float_format=lambda v: f"{v:.3f}", na_rep="-"
        )
    )
    if what_if:
        from pipelines.monitoring.what_if_report import format_what_if, what_if_report

        with user_errors():
            report = what_if_report(settings, since, until)
        click.echo("\nWhat if the model had decided (shadow and held-back tasks):")
        click.echo(format_what_if(report.summary))
