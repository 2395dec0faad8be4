"""``panda-predictor export``: PanDA's history tables to Parquet, month by month."""

from __future__ import annotations

from pathlib import Path

import click

from panda_predictor.settings import Settings


@click.command("export")
@click.option(
    "--to",
    "fmt",
    type=click.Choice(["parquet"]),
    required=True,
    help="Output format (Parquet, Hive-style month partitions).",
)
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--batch-rows",
    type=click.IntRange(min=1),
    default=50_000,
    show_default=True,
    help="Rows fetched and written per batch (bounds memory).",
)
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
@click.pass_obj
def export(
    settings: Settings, fmt: str, out_dir: Path, batch_rows: int, no_progress: bool
) -> None:
    """Export JEDI_TASKS, JEDI_DATASETS and JOBSARCHIVED4 to OUT_DIR, a month at a time.

    Writes OUT_DIR/<table>/month=YYYY-MM/part-0.parquet and keeps a manifest of the
    months done, each verified against COUNT(*) in the database. Run it again to
    resume after an interruption or to add new months: finished months are skipped,
    the current month is exported again. The Spark label engine reads this layout
    ('panda-predictor labels --engine spark --input OUT_DIR').

    \b
    Examples:
      panda-predictor export --to parquet var/export
      PANDA_PREDICTOR_DB_URL=postgresql+psycopg://reader@db/panda \\
          panda-predictor export --to parquet /data/panda-export
    """
    from panda_predictor.cli.errors import user_errors
    from pipelines.export import export_history

    with user_errors():  # an ExportMismatch too: its message says to run it again
        summary = export_history(
            settings, out_dir, batch_rows=batch_rows, progress=not no_progress
        )
    for name, written in summary.written.items():
        click.echo(
            f"{name}: {_months(written)} written ({summary.rows[name]} rows), "
            f"{summary.skipped[name]} already done"
        )
    click.echo(f"Export in {summary.root}")


def _months(n: int) -> str:
    return f"{n} month" if n == 1 else f"{n} months"
