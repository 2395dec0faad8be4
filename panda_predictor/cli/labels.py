"""``panda-predictor labels``: compute the history's scout labels (and fit bins)."""

from __future__ import annotations

from pathlib import Path

import click

from panda_predictor.settings import Settings


@click.command("labels")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Parquet file to write (default: <home>/labels.parquet).",
)
@click.option(
    "--fit-bins",
    "fit_bins_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also fit class edges from the labels' quantiles and save them as YAML here.",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="Tasks read per chunk.",
)
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
@click.pass_obj
def labels(
    settings: Settings,
    out: Path | None,
    fit_bins_path: Path | None,
    chunk_size: int,
    no_progress: bool,
) -> None:
    """Compute each task's labels from its scout jobs, as PanDA does, and store them.

    \b
    Examples:
      panda-predictor labels
      panda-predictor labels --out var/labels.parquet --fit-bins var/bins.yaml
    """
    from panda_predictor.cli.errors import user_errors
    from pipelines.build_labels import run

    with user_errors():
        result = run(
            settings,
            out=out,
            fit_bins_path=fit_bins_path,
            chunk_size=chunk_size,
            progress=not no_progress,
        )
    click.echo(
        f"Labelled {result.n_tasks} tasks ({result.n_labelled} with scouts): "
        f"{result.labels_path}"
    )
    if result.bins_path is not None:
        click.echo(f"Bins fitted from the labels: {result.bins_path}")
