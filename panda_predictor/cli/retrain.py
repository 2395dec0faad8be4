"""``panda-predictor retrain``: retraining when due, gated and idempotent promotion."""

from __future__ import annotations

import click

from panda_predictor.cli.options import (
    gate_tolerance_option,
    kind_option,
    params_option,
)
from panda_predictor.settings import Settings


@click.command("retrain")
@params_option
@kind_option
@click.option(
    "--window-months",
    type=click.IntRange(min=1),
    default=None,
    help="Months of history before the window's end (default: setting "
    "retrain_window_months, 12).",
)
@click.option(
    "--cadence",
    type=click.Choice(["auto", "monthly"]),
    default="auto",
    show_default=True,
    help="auto: train only when the cadence the models chose from the deployment's "
    "own past is due (run daily; the window ends at today's start); monthly: train "
    "on every run, on the window ending at the month's start.",
)
@click.option(
    "--refit-bins", is_flag=True, help="Refit the class edges on the window's labels."
)
@click.option(
    "--if-drift",
    is_flag=True,
    help="Retrain only if 'panda-predictor drift' would detect drift (then even "
    "before the cadence is due).",
)
@click.option(
    "--now",
    type=click.DateTime(),
    default=None,
    help="Pretend it is this time (the window ends at its day's start, or its "
    "month's with --cadence monthly).",
)
@gate_tolerance_option
@click.option("--no-progress", is_flag=True, help="Hide progress bars.")
@click.pass_obj
def retrain(
    settings: Settings,
    params_file: str | None,
    kinds: tuple[str, ...],
    window_months: int | None,
    cadence: str,
    refit_bins: bool,
    if_drift: bool,
    now,
    gate_tolerances: tuple[str, ...],
    no_progress: bool,
) -> None:
    """Retrain on the last months of history when due; promote only if not worse.

    Each training chooses how often to retrain from the deployment's own past (how
    fast its accuracy falls with the model's age: 7, 30 or 91 days) and records it on
    the registered version. With the default --cadence auto, a run trains only once
    the newest trained data is that old, and otherwise records "skipped_not_due".
    Training evaluates challenger and champion on the same newest held-out tasks,
    promotes only if the challenger is not worse (the champion gate), records the
    comparison in MLflow and writes a summary page. A second run on the same window
    with the same data and parameters registers nothing; a run that dies leaves the
    champion untouched.

    \b
    Examples:
      panda-predictor retrain --if-drift --window-months 6
      panda-predictor retrain --now 2026-07-01 --no-progress
      panda-predictor retrain --cadence monthly
      panda-predictor retrain --gate-tolerance accuracy=0.02

    \b
    Daily, from cron (02:30); it trains only when the chosen cadence is due:
      30 2 * * * panda-predictor retrain --no-progress >> /var/log/pp-retrain.log 2>&1
    """
    from model_registry.gate import GateThresholds
    from panda_predictor.cli.errors import user_errors
    from panda_predictor.cli.inputs import training_config_from
    from pipelines.retraining.retrain import RetrainConfig, run_retrain

    with user_errors():
        months = window_months or settings.retrain_window_months
        config = RetrainConfig(
            window_months=months,
            cadence=cadence,
            refit_bins=refit_bins,
            if_drift=if_drift,
            training=training_config_from(settings, params_file, kinds),
            gate=GateThresholds.from_settings(settings, gate_tolerances),
        )
        outcome = run_retrain(settings, config, now=now, progress=not no_progress)
    click.echo(
        f"Window {outcome.since:%Y-%m-%d} .. {outcome.until:%Y-%m-%d}: "
        f"{outcome.status}"
        + (f", version {outcome.version}" if outcome.version else "")
        + (f" ({outcome.reason})" if outcome.reason else "")
    )
    for line in outcome.gate_table:
        click.echo(f"  {line}")
    if outcome.report:
        click.echo(f"Summary: {outcome.report}")
