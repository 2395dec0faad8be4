"""``panda-predictor hook``: the database submit hook (cron, daemon or one task)."""

from __future__ import annotations

import click

from panda_predictor.settings import Settings


@click.command("hook")
@click.option(
    "--once",
    "mode",
    flag_value="once",
    default=True,
    help="One pass over the eligible tasks, then exit (for cron; default).",
)
@click.option(
    "--watch",
    "mode",
    flag_value="watch",
    help="Poll every --interval seconds until SIGTERM/SIGINT.",
)
@click.option(
    "--task-id",
    "task_ids",
    type=int,
    multiple=True,
    help="Only these JEDITASKIDs (repeatable).",
)
@click.option("--dry-run", is_flag=True, help="Predict and print; write nothing.")
@click.option(
    "--interval",
    type=float,
    default=None,
    help="Seconds between passes with --watch (default: hook_poll_seconds).",
)
@click.pass_obj
def hook(
    settings: Settings,
    mode: str,
    task_ids: tuple[int, ...],
    dry_run: bool,
    interval: float | None,
) -> None:
    """Predict tasks waiting for scouts and write the resources back to JEDI_TASKS.

    Eligible tasks are 'defined' or 'ready', still have a US= scout rule in
    SPLITRULE and no audit row yet. Confident predictions are written and the scout
    rule removed ('applied'); the others keep their scouts ('kept_scouts'); every
    task gets an audit row in pp_prediction_audit. Failures never touch a task.
    With mode 'shadow' nothing is written (decision 'shadow'); with rollout_share
    below 1 the tasks outside the share keep their scouts ('held_back').

    \b
    Examples:
      panda-predictor hook --once
      panda-predictor hook --task-id 4000123 --dry-run
      panda-predictor hook --watch --interval 30
    """
    from panda_predictor.cli.render import predictions_table
    from panda_predictor.hook import SubmitHook, run_hook_once

    if mode == "watch":
        if dry_run or task_ids:
            raise click.UsageError(
                "--watch cannot be combined with --dry-run or --task-id."
            )
        hook_ = SubmitHook(settings)
        passes = hook_.watch(interval)
        click.echo(f"Stopped after {passes} passes.")
        return
    report = run_hook_once(settings, task_ids or None, dry_run)
    click.echo(predictions_table(report.predictions))
    if report.failure:
        click.echo(
            f"Failed open (tasks untouched, scouts run): {report.failure}", err=True
        )
        raise SystemExit(3)
    if dry_run:
        click.echo(
            f"Dry run: {len(report.predictions)} tasks predicted, nothing written."
        )
    else:
        rollout = "".join(
            f", {len(ids)} {name.replace('_', ' ')} (scouts run)"
            for name, ids in (
                ("shadow", report.shadow),
                ("held_back", report.held_back),
            )
            if ids
        )
        click.echo(
            f"{len(report.applied)} applied, {len(report.kept_scouts)} kept "
            f"scouts{rollout}, {len(report.moved_by_jedi)} moved by JEDI meanwhile."
        )
