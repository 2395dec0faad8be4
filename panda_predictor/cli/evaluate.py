"""``panda-predictor evaluate``: score the champion, or walk forward month by month."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from panda_predictor.cli.options import kind_option, params_option
from panda_predictor.settings import Settings


@click.command("evaluate")
@click.option(
    "--walk-forward",
    "months",
    type=click.IntRange(min=1),
    default=None,
    help="Retrain before each of the last N months and score that month "
    "(what production sees), instead of scoring the champion.",
)
@kind_option
@params_option
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to write report.md (default: <home>/reports/evaluate-*).",
)
@click.option("--no-progress", is_flag=True, help="Hide progress bars.")
@click.pass_obj
def evaluate(
    settings: Settings,
    months: int | None,
    kinds: tuple[str, ...],
    params_file: str | None,
    report_dir: str | None,
    no_progress: bool,
) -> None:
    """Evaluate on the database's history and write a report with plots.

    Without options: the champion from the registry is scored on the newest 15 % of
    the history (time-ordered, as in training). With --walk-forward N: for each of
    the last N months, both model kinds are retrained on everything before the
    month and scored on it.

    \b
    Examples:
      panda-predictor evaluate
      panda-predictor evaluate --walk-forward 3 --kind xgboost
    """
    from panda_predictor.cli.errors import user_errors
    from panda_predictor.cli.inputs import training_config_from
    from pipelines.evaluation.champion import run_evaluation

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = (
        Path(report_dir)
        if report_dir
        else settings.home / "reports" / (f"evaluate-{stamp}")
    )
    with user_errors():
        config = training_config_from(settings, params_file, kinds)
        report, table = run_evaluation(
            settings, out, months, config, progress=not no_progress
        )
    if table is not None:
        click.echo(table.to_string(index=False, float_format="%.3f"))
    click.echo(f"Report: {report}")
