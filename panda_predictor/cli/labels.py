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
    help="Tasks read (python) or aggregated per query (sql) per chunk.",
)
@click.option(
    "--engine",
    type=click.Choice(["python", "sql", "spark"]),
    default="python",
    show_default=True,
    help="python: read the database chunk by chunk in this process. sql: aggregate "
    "inside PostgreSQL or Oracle, one row per task comes back. spark: read Parquet "
    "exports (--input) on a Spark cluster. The labels are the same.",
)
@click.option(
    "--input",
    "input_dir",
    default=None,
    help="[spark] Folder (or HDFS/S3 URL Spark can read) holding jedi_tasks/ and "
    "jobsarchived4/ Parquet, as 'panda-predictor export' writes them.",
)
@click.option(
    "--master",
    default="local[2]",
    show_default=True,
    help="[spark] Spark master: local[N], yarn, k8s://https://<api-server>:6443.",
)
@click.option(
    "--conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="[spark] A Spark setting, e.g. spark.executor.memory=8g (repeatable).",
)
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
@click.pass_obj
def labels(
    settings: Settings,
    out: Path | None,
    fit_bins_path: Path | None,
    chunk_size: int,
    engine: str,
    input_dir: str | None,
    master: str,
    spark_conf: tuple[str, ...],
    no_progress: bool,
) -> None:
    """Compute each task's labels from its scout jobs, as PanDA does, and store them.

    \b
    Examples:
      panda-predictor labels
      panda-predictor labels --out var/labels.parquet --fit-bins var/bins.yaml
      panda-predictor labels --engine sql --chunk-size 20000     # PostgreSQL, Oracle
      panda-predictor export --to parquet var/export
      panda-predictor labels --engine spark --master 'local[2]' --input var/export
    """
    from panda_predictor.cli.errors import user_errors
    from pipelines.registry import runner

    if engine == "spark" and input_dir is None:
        raise click.UsageError("--engine spark needs --input DIR (Parquet exports).")
    if engine != "spark" and input_dir is not None:
        raise click.UsageError("--input is read by --engine spark only.")
    conf = {}
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(
                f"must be KEY=VALUE. Got {item!r} instead.", param_hint="--conf"
            )
        conf[key] = value
    label = runner("labels" if engine == "python" else f"labels-{engine}")
    with user_errors():
        if engine == "spark":
            assert input_dir is not None
            result = label(
                settings,
                input_dir,
                master=master,
                conf=conf,
                out=out,
                fit_bins_path=fit_bins_path,
                progress=not no_progress,
            )
        else:
            result = label(
                settings,
                chunk_size=chunk_size,
                out=out,
                fit_bins_path=fit_bins_path,
                progress=not no_progress,
            )
    click.echo(
        f"Labelled {result.n_tasks} tasks ({result.n_labelled} with scouts): "
        f"{result.labels_path}"
    )
    if result.bins_path is not None:
        click.echo(f"Bins fitted from the labels: {result.bins_path}")
