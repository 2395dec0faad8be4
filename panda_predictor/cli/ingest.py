"""``panda-predictor ingest swf FILE``: read a real job log into our task model."""

from __future__ import annotations

from pathlib import Path

import click

from panda_predictor.cli.errors import user_errors
from panda_predictor.settings import Settings


@click.group("ingest")
def ingest() -> None:
    """Read outside job logs into the plugin's task model."""


@ingest.command("swf")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Parquet file to write (default: <home>/traces/<name>.parquet).",
)
@click.pass_obj
def swf(settings: Settings, file: Path, out: Path | None) -> None:
    """Read an SWF file (gzip or plain), write its task rows, print a summary."""
    from panda_predictor.ingest.swf import read_swf, trace_name

    with user_errors():
        frame, report = read_swf(file)
    target = out or settings.home / "traces" / f"{trace_name(file)}.parquet"
    target.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(target, index=False)
    for line in report.lines():
        click.echo(line)
    click.echo(f"written: {target}")
