"""``panda-predictor benchmark``: models versus the field's baselines on real logs."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from panda_predictor.cli.errors import user_errors
from panda_predictor.settings import Settings
from pipelines.evaluation.walk_forward import AUTO_CADENCE, CADENCES

logger = logging.getLogger(__name__)


def _half_life(value: str) -> float | str | None:
    """Return the --half-life value: days, None ('none') or 'auto'."""
    if value.lower() in ("auto", "none"):
        return None if value.lower() == "none" else "auto"
    try:
        days = float(value)
    except ValueError:
        days = float("nan")
    if not days > 0:
        raise click.BadParameter(
            f"must be a positive number of days, 'none' or 'auto'. Got {value!r}."
        )
    return days


@click.command("benchmark")
@click.option(
    "--log",
    "--swf",
    "swf_file",
    type=click.Path(path_type=Path),
    default=None,
    help="One job log to benchmark: SWF, condor_history -json or a Nextflow trace "
    "(plain or gzip), or a folder of one pipeline's Nextflow traces.",
)
@click.option(
    "--all",
    "all_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Benchmark every job log of a folder, one after another: *.swf(.gz), "
    "*.json(.gz), *.jsonl, Nextflow trace files and sub-folders of them. Other "
    "files are named and passed over; a log that cannot be benchmarked (its "
    "reason printed) does not stop the others, and the command then exits 1.",
)
@click.option(
    "--test-fraction",
    type=click.FloatRange(0.01, 0.9),
    default=0.2,
    show_default=True,
    help="Newest share of the jobs that is tested.",
)
@click.option(
    "--cadence",
    type=click.Choice([AUTO_CADENCE, *CADENCES]),
    default=AUTO_CADENCE,
    show_default=True,
    help="When to retrain: auto (each retraining chooses the days until the next "
    "from how fast its models age on its own validation tasks; see "
    "docs/evaluation.md), or before each calendar month, week or day.",
)
@click.option(
    "--max-periods",
    type=click.IntRange(min=1),
    default=None,
    help="Test at most this many walk-forward periods.",
)
@click.option(
    "--dev",
    is_flag=True,
    help="Development run: drop the test part and walk forward through the newest "
    "--test-fraction of the older jobs instead, so a design choice can be tried "
    "without looking at the real test part.",
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
    default=100_000,
    show_default=True,
    help="Newest finished tasks each retraining uses at most (a bound on its "
    "cost; within it, the time-decay weights of --half-life decide).",
)
@click.option(
    "--half-life",
    "half_life",
    default="auto",
    show_default=True,
    callback=lambda _ctx, _param, value: _half_life(value),
    help="Days over which a finished task's training weight halves: a number, "
    "'none' (all history weighs the same) or 'auto' (each retraining chooses per "
    "target on its own validation tasks).",
)
@click.option(
    "--n-estimators",
    type=click.IntRange(min=1),
    default=None,
    help="Maximum boosting rounds of XGBoost; default: training.yaml's (early "
    "stopping ends most fits sooner).",
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
    cadence: str,
    max_periods: int | None,
    dev: bool,
    max_jobs: int | None,
    max_train_rows: int,
    half_life: float | str | None,
    n_estimators: int | None,
    json_path: Path | None,
    out_dir: Path | None,
    no_mlflow: bool,
) -> None:
    """Walk forward through the newest jobs of real logs; print one table per target.

    The production predictor (the same features, XGBoost model, tail rule, expert
    combination and policy the hook runs) and the field's baselines predict the
    newest --test-fraction of each log (SWF or condor_history -json), retrained
    before each test period on the tasks whose labels were known before it.
    Tables, the goal checks, the macro-F1 lead with its day-bootstrap interval
    and the replay of scouts versus prediction are printed and written to
    <home>/benchmarks/<file>/ (report.md, full.json, and the figures pareto.png
    and reliability.png; see docs/evaluation.md).

    \b
    Examples:
      panda-predictor benchmark --log ../shared/data/traces/KTH-SP2-1996-2.1-cln.swf.gz
      panda-predictor benchmark --all ../shared/data/traces --json all.json
      panda-predictor benchmark --log history.json   # condor_history -json output
      panda-predictor benchmark --log results/pipeline_info/   # Nextflow traces
      panda-predictor benchmark --log FILE --dev --cadence week   # no test part seen
    """
    import json

    from panda_predictor.ingest import job_logs_in, passed_over
    from pipelines.evaluation.trace.benchmark import (
        log_to_mlflow,
        report_folder,
        run_benchmark,
        walk_config,
        write_outputs,
    )

    if (swf_file is None) == (all_dir is None):
        raise click.UsageError("Give exactly one of --log FILE or --all DIR.")
    if swf_file is not None:
        files = [swf_file]
    else:
        assert all_dir is not None
        files = job_logs_in(all_dir)
    if not files:
        raise click.ClickException(
            f"No job log (*.swf, *.json, Nextflow trace) in {all_dir}."
        )
    if all_dir is not None:
        _say_what_all_takes(files, passed_over(all_dir, files))
    config = walk_config(
        settings,
        test_fraction=test_fraction,
        max_train_rows=max_train_rows,
        max_periods=max_periods,
        cadence=cadence,
        half_life_days=half_life,
        n_estimators=n_estimators,
    )
    base = out_dir or settings.home / "benchmarks"
    documents = []
    failed: list[str] = []
    for path in files:
        try:
            with user_errors():
                result = run_benchmark(path, config, max_jobs=max_jobs, dev=dev)
        except click.UsageError:
            raise
        except click.ClickException as exc:
            if all_dir is None:
                raise
            # One log's own fault (--all): say it and go on with the others.
            click.echo(f"Not benchmarked: {path.name}: {exc.format_message()}")
            failed.append(path.name)
            continue
        written = write_outputs(result, base / report_folder(path, dev))
        if not no_mlflow:
            run_id = log_to_mlflow(settings, result, written)
            click.echo(f"MLflow run {run_id} (experiment panda-predictor-traces)")
        click.echo(result.report)
        click.echo(
            f"Written to {written[0].parent}: " + ", ".join(f.name for f in written)
        )
        documents.append(result.to_json())
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        payload = documents[0] if swf_file is not None else documents
        json_path.write_text(json.dumps(payload, indent=2, default=str))
        click.echo(f"JSON written: {json_path}")
    if failed:
        raise click.ClickException(
            f"{len(failed)} of {len(files)} logs not benchmarked (the reasons are "
            f"above): {', '.join(failed)}."
        )


def _say_what_all_takes(logs: list[Path], others: list[Path]) -> None:
    """Print which logs ``--all`` benchmarks and which files it passes over."""
    click.echo(f"Benchmarking {_many(len(logs), 'job log')}: " + _names(logs))
    if others:
        click.echo(
            f"Passed over {_many(len(others), 'file')} ({_names(others)}): not named "
            "*.swf(.gz) or *.json(l)(.gz) and no Nextflow header; give a log among "
            "them with --log, which tells the format by its content."
        )


def _many(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")


def _names(paths: list[Path]) -> str:
    return ", ".join(p.name for p in paths)
