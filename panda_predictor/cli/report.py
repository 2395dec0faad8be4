"""``panda-predictor report``: a static HTML page of the model's health."""

from __future__ import annotations

from pathlib import Path

import click

from panda_predictor.settings import Settings


@click.command("report")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder (default: <home>/reports/monitoring).",
)
@click.pass_obj
def report(settings: Settings, out_dir: str | None) -> None:
    """Write an HTML page with plots of the model's health, from stored state.

    Shows accuracy and under-allocation per target and ISO week (from
    'panda-predictor feedback'), calibration and coverage-versus-accuracy curves per
    target, the latest gate's challenger against champion with links to the
    training reports, the last drift check and the drift trend, the champion's
    confusion matrices and the last retraining decisions. Open index.html in any
    browser; no server needed. scripts/check-report.sh checks it in Chromium.

    \b
    Example:
      panda-predictor feedback && panda-predictor report --out var/reports/monitoring
    """
    from panda_predictor.cli.errors import user_errors
    from pipelines.monitoring.report import render_report

    with user_errors():
        path = render_report(settings, Path(out_dir) if out_dir else None)
    click.echo(f"Report: {path}")
