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

    \b
    Exit codes:
      0  the pass ran (every --task-id was predicted)
      3  the pass failed open: nothing written, scouts run
      4  a --task-id is not eligible; the reason is printed (not found,
         status, no scout rule, locked by JEDI, already audited with its
         decision and time)

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
        click.echo(
            f"{len(report.applied)} applied, {len(report.kept_scouts)} kept "
            f"scouts, {len(report.moved_by_jedi)} moved by JEDI meanwhile."
        )
    predicted = {p.jeditaskid for p in report.predictions}
    missing = [t for t in task_ids if t not in predicted]
    if missing:
        _explain_not_eligible(settings, missing)


#: Exit code of ``hook --task-id`` when a named task is not eligible.
NOT_ELIGIBLE_EXIT = 4


def _explain_not_eligible(settings: Settings, task_ids: list[int]) -> None:
    """Print why each named task was not predicted and exit with code 4."""
    from panda_predictor.db.eligibility import why_not_eligible
    from panda_predictor.db.engine import make_engine

    engine = make_engine(settings)
    try:
        with engine.connect() as conn:
            found = {
                i.jeditaskid: i.reason
                for i in why_not_eligible(conn, settings, task_ids)
            }
    finally:
        engine.dispose()
    for task_id in sorted(set(task_ids)):
        if task_id in found:
            click.echo(f"jediTaskID={task_id} not eligible: {found[task_id]}", err=True)
        else:
            click.echo(
                f"jediTaskID={task_id} not predicted in this pass: another hook "
                "claimed it or JEDI changed it meanwhile; try again",
                err=True,
            )
    raise SystemExit(NOT_ELIGIBLE_EXIT)
