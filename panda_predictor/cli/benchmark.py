"""``panda-predictor benchmark``: models versus the field's baselines on real logs."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from panda_predictor.cli.errors import user_errors
from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)


@click.command("benchmark")
@click.option(
    "--swf",
    "swf_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="One SWF file to benchmark.",
)
@click.option(
    "--all",
    "all_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Benchmark every *.swf / *.swf.gz file of a folder, one after another.",
)
@click.option(
    "--test-fraction",
    type=click.FloatRange(0.01, 0.9),
    default=0.2,
    show_default=True,
    help="Newest share of the jobs that is tested.",
)
@click.option("--keras", is_flag=True, help="Also train the (slower) Keras network.")
@click.option(
    "--max-months",
    type=click.IntRange(min=1),
    default=None,
    help="Test at most this many walk-forward months.",
)
@click.option(
    "--max-jobs",
    type=click.IntRange(min=100),
    default=None,
    help="Use only the newest this many jobs of each file.",
)
@click.option(
    "--max-train-rows",
    type=click.IntRange(min=100),
    default=20000,
    show_default=True,
    help="Newest finished jobs each retraining uses.",
)
@click.option(
    "--n-estimators",
    type=click.IntRange(min=1),
    default=150,
    show_default=True,
    help="Maximum boosting rounds of XGBoost (early stopping after 10 idle rounds).",
)
@click.option(
    "--max-categories",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Most frequent users/executables/... kept per feature (rest: 'other').",
)
@click.option(
    "--validation",
    type=click.Choice(["random", "newest"]),
    default="newest",
    show_default=True,
    help="Early-stopping rows: the newest tenth of the window, or a random tenth "
    "of the older rows (the newest tenth tunes the safety level in both cases).",
)
@click.option(
    "--no-safety",
    is_flag=True,
    help="Skip the safety-aware model rows (model:<kind>_safe).",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the results as JSON here (--all: a folder "
    "path is not allowed; one JSON list is written).",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Report folder (default: <home>/benchmarks).",
)
@click.option("--no-mlflow", is_flag=True, help="Do not log the run to MLflow.")
@click.pass_obj
def benchmark(
    settings: Settings,
    swf_file: Path | None,
    all_dir: Path | None,
    test_fraction: float,
    keras: bool,
    max_months: int | None,
    max_jobs: int | None,
    max_train_rows: int,
    n_estimators: int,
    max_categories: int,
    validation: str,
    no_safety: bool,
    json_path: Path | None,
    out_dir: Path | None,
    no_mlflow: bool,
) -> None:
    """Walk forward through the newest jobs of real logs; print one table per target."""
    import json

    from panda_predictor.ingest.swf import trace_name
    from pipelines.trace.walk_forward import WalkForwardConfig
    from pipelines.trace_benchmark import log_to_mlflow, run_benchmark, write_outputs

    if (swf_file is None) == (all_dir is None):
        raise click.UsageError("Give exactly one of --swf FILE or --all DIR.")
    if swf_file is not None:
        files = [swf_file]
    else:
        assert all_dir is not None
        files = sorted(
            p for p in all_dir.iterdir() if p.name.endswith((".swf", ".swf.gz"))
        )
    if not files:
        raise click.ClickException(f"No *.swf or *.swf.gz file in {all_dir}.")
    config = WalkForwardConfig(
        test_fraction=test_fraction,
        models=("xgboost", "keras") if keras else ("xgboost",),
        max_train_rows=max_train_rows,
        max_months=max_months,
        n_estimators=n_estimators,
        max_categories=max_categories,
        safety=not no_safety,
        validation=validation,
    )
    base = out_dir or settings.home / "benchmarks"
    documents = []
    for path in files:
        with user_errors():
            result = run_benchmark(
                path, config, settings.confidence_threshold, max_jobs
            )
        written = write_outputs(result, base / trace_name(path))
        if not no_mlflow:
            run_id = log_to_mlflow(settings, result, written)
            click.echo(f"MLflow run {run_id} (experiment panda-predictor-traces)")
        click.echo(result.report)
        documents.append(result.to_json())
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        payload = documents[0] if swf_file is not None else documents
        json_path.write_text(json.dumps(payload, indent=2, default=str))
        click.echo(f"JSON written: {json_path}")
