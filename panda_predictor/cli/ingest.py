"""``panda-predictor ingest log FILE``: a real job log in the hook's task schema."""

from __future__ import annotations

from pathlib import Path

import click

from panda_predictor.cli.errors import user_errors
from panda_predictor.settings import Settings

_OUT = click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Parquet file to write (default: <home>/traces/<name>.parquet).",
)


@click.group("ingest")
def ingest() -> None:
    """Read outside job logs into the plugin's task and history schema.

    \b
    Example:
      panda-predictor ingest log ../shared/data/traces/LCG-2005-1.swf.gz
    """


def _ingest(settings: Settings, file: Path, out: Path | None) -> None:
    from panda_predictor.ingest import read_job_log, trace_name
    from panda_predictor.ingest.to_panda import jobs_to_tasks

    with user_errors():
        frame, report = read_job_log(file)
    tasks = jobs_to_tasks(frame)
    target = out or settings.home / "traces" / f"{trace_name(file)}.parquet"
    target.parent.mkdir(parents=True, exist_ok=True)
    tasks.to_parquet(target, index=False)
    for line in report.lines():
        click.echo(line)
    click.echo(f"written: {target} ({len(tasks)} tasks, labels and labels_known_at)")


@ingest.command("log")
@click.argument("file", type=click.Path(path_type=Path))
@_OUT
@click.pass_obj
def log(settings: Settings, file: Path, out: Path | None) -> None:
    """Read a job log (SWF, condor_history -json, Nextflow trace) into task rows.

    Each job becomes one task in the schema the hook and the training pipeline
    read: JEDI_TASKS columns, the requester's values, the labels and the time
    they became known. A summary of what was read (and set aside) is printed.
    FILE may be a folder of one pipeline's Nextflow traces (one history). Nothing
    is written from a log that fails to read.

    \b
    Examples:
      panda-predictor ingest log ../shared/data/traces/LCG-2005-1.swf.gz
      condor_history -json > history.json && panda-predictor ingest log history.json
      panda-predictor ingest log results/pipeline_info/execution_trace.txt
    """
    _ingest(settings, file, out)


@ingest.command("swf")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@_OUT
@click.pass_obj
def swf(settings: Settings, file: Path, out: Path | None) -> None:
    """Read an SWF file (gzip or plain): the same as ``ingest log``.

    \b
    Example:
      panda-predictor ingest swf ../shared/data/traces/KTH-SP2-1996-2.1-cln.swf.gz
    """
    _ingest(settings, file, out)
