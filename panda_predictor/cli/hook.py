"""``panda-predictor hook``: the database submit hook (cron, daemon or one task)."""

from __future__ import annotations

import click

from panda_predictor.cli.errors import user_errors
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
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="With --watch: serve Prometheus /metrics on this port while watching.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the /metrics endpoint listens on (0.0.0.0: every interface).",
)
@click.option(
    "--metrics-textfile",
    type=click.Path(dir_okay=False),
    default=None,
    help="With --once: write the metrics to this node-exporter textfile (*.prom) "
    "at the end of the pass, also when it fails.",
)
@click.pass_obj
def hook(
    settings: Settings,
    mode: str,
    task_ids: tuple[int, ...],
    dry_run: bool,
    interval: float | None,
    metrics_port: int | None,
    metrics_host: str,
    metrics_textfile: str | None,
) -> None:
    """Predict tasks waiting for scouts and write the resources back to JEDI_TASKS.

    Eligible tasks are 'defined' or 'ready', still have a US= scout rule in
    SPLITRULE and no audit row yet. Confident predictions are written and the scout
    rule removed ('applied'); the others keep their scouts ('kept_scouts'); every
    task gets an audit row in pp_prediction_audit. Failures never touch a task.
    With mode 'shadow' nothing is written (decision 'shadow'); with rollout_share
    below 1 the tasks outside the share keep their scouts ('held_back').

    \b
    Exit codes:
      0  the pass ran (every --task-id was predicted)
      3  the pass failed open: nothing written, scouts run (also a
         database fault of no task, e.g. a missing grant: none is
         audited 'error')
      4  a --task-id is not eligible; the reason is printed (not found,
         status, no scout rule, locked by JEDI, already audited with its
         decision and time)

    \b
    Examples:
      panda-predictor hook --once
      panda-predictor hook --task-id 4000123 --dry-run
      panda-predictor hook --watch --interval 30
      panda-predictor hook --watch --metrics-port 9464
      panda-predictor hook --once --metrics-textfile /var/lib/node_exporter/pp.prom
    """
    if mode == "watch":
        _watch(
            settings,
            task_ids,
            dry_run,
            interval,
            (metrics_port, metrics_host, metrics_textfile),
        )
    else:
        _once(settings, task_ids, dry_run, metrics_port, metrics_textfile)


def _watch(
    settings: Settings,
    task_ids: tuple[int, ...],
    dry_run: bool,
    interval: float | None,
    metrics: tuple[int | None, str, str | None],
) -> None:
    """Run passes until stopped, serving /metrics if a port is given."""
    from panda_predictor.hook.submit import SubmitHook

    metrics_port, metrics_host, metrics_textfile = metrics
    if dry_run or task_ids:
        raise click.UsageError(
            "--watch cannot be combined with --dry-run or --task-id."
        )
    if metrics_textfile:
        raise click.UsageError(
            "--metrics-textfile is for --once; with --watch use --metrics-port."
        )
    hook_ = SubmitHook(settings)
    server = _serve_metrics(metrics_port, metrics_host)
    try:
        passes = hook_.watch(interval)
    finally:
        if server is not None:
            server.shutdown()
    click.echo(f"Stopped after {passes} passes.")


def _once(
    settings: Settings,
    task_ids: tuple[int, ...],
    dry_run: bool,
    metrics_port: int | None,
    metrics_textfile: str | None,
) -> None:
    """Run one pass, print what it predicted and did, and exit 3 or 4 as documented."""
    from panda_predictor.cli.render import predictions_table
    from panda_predictor.core.domain.units import database_value
    from panda_predictor.hook.report import pass_summary
    from panda_predictor.hook.submit import run_hook_once

    if metrics_port is not None:
        raise click.UsageError(
            "--metrics-port is for --watch; with --once use --metrics-textfile."
        )
    if metrics_textfile:
        from panda_predictor.metrics import check_textfile_path

        with user_errors():  # a bad path is an OptionError: exit 2 like click's
            check_textfile_path(metrics_textfile)
        # On close, so the pass's counts are written also when it exits 3.
        click.get_current_context().call_on_close(
            lambda: _write_textfile(metrics_textfile)
        )
    report = run_hook_once(settings, task_ids or None, dry_run)
    # What the database path writes (no milli cputime unit, see database_value).
    click.echo(predictions_table(report.predictions, convert=database_value))
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
        click.echo(pass_summary(report) + ".")
    predicted = {p.jeditaskid for p in report.predictions}
    missing = [t for t in task_ids if t not in predicted]
    if missing:
        _explain_not_eligible(settings, missing)


def _serve_metrics(port: int | None, host: str):
    """Start the /metrics endpoint of a watching hook (None: no endpoint)."""
    if port is None:
        return None
    from panda_predictor.metrics import serve_metrics

    with user_errors():  # a port in use is an OptionError: exit 2 like click's
        server = serve_metrics(port, host)
    click.echo(f"Metrics on http://{host}:{port}/metrics")
    return server


def _write_textfile(path: str) -> None:
    """Write the node-exporter textfile, or say on stderr why it could not be."""
    from panda_predictor.metrics import MetricsOptionError, write_textfile

    try:
        write_textfile(path)
    except (MetricsOptionError, OSError) as exc:
        click.echo(f"Metrics textfile not written: {exc}", err=True)


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
