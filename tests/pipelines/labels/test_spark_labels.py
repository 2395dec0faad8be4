"""Spark labels equal the Python path's, on awkward and simulated data."""

from __future__ import annotations

import pandas as pd
import pytest

from panda_predictor.core.labels import labels_frame
from panda_predictor.errors import UserInputError
from pipelines.labels.spark.engine import spark_labels
from tests.core.test_labels import make_history

pytestmark = [
    pytest.mark.spark,
    # py4j leaves its gateway sockets to the garbage collector.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


def write_layout(root, tasks: pd.DataFrame, jobs: pd.DataFrame, parts: int = 3):
    """Write tasks and jobs as the exporter does, split over ``parts`` partitions."""
    for name, frame in (("jedi_tasks", tasks), ("jobsarchived4", jobs)):
        for i in range(parts):
            part = root / name / f"month=2026-{i + 1:02d}"
            part.mkdir(parents=True)
            frame.iloc[i::parts].to_parquet(part / "part-0.parquet", index=False)


def assert_same_labels(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    got = got.sort_values("jeditaskid").reset_index(drop=True)
    expected = expected.sort_values("jeditaskid").reset_index(drop=True)
    # Exact: no tolerance, NaN where NaN, the same PanDA integers and units.
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


@pytest.mark.parametrize("seed", [3, 11])
def test_spark_labels_equal_the_python_labels_on_awkward_history(spark, tmp_path, seed):
    tasks, jobs = make_history(seed, n_tasks=80)
    write_layout(tmp_path, tasks, jobs)

    got = spark_labels(spark, tmp_path)

    assert_same_labels(got, labels_frame(jobs, tasks))
    assert (got["n_scouts"] == 0).any() and got["ramcount"].notna().any()


def test_spark_labels_equal_the_python_labels_on_simulated_history(spark, tmp_path):
    from pipelines.simulation import SimulationConfig, simulate_frames

    frames = simulate_frames(SimulationConfig(n_tasks=400, n_defined=0, seed=5))
    tasks, jobs = frames.jedi_tasks, frames.jobsarchived4
    write_layout(tmp_path, tasks, jobs)

    got = spark_labels(spark, tmp_path)

    assert_same_labels(got, labels_frame(jobs, tasks))
    assert got["cputime_unit"].notna().sum() > 100


def test_spark_labels_equal_the_python_labels_on_100k_simulated_tasks(spark, tmp_path):
    """The issue's size: 100,000 tasks, about 850,000 job rows, every label equal."""
    from pipelines.simulation import SimulationConfig, simulate_frames

    config = SimulationConfig(n_tasks=100_000, n_defined=0, seed=13)
    frames = simulate_frames(config)
    tasks, jobs = frames.jedi_tasks, frames.jobsarchived4
    write_layout(tmp_path, tasks, jobs, parts=6)

    got = spark_labels(spark, tmp_path)

    assert len(got) == 100_000 and len(jobs) > 800_000
    assert_same_labels(got, labels_frame(jobs, tasks))


def test_missing_folder_is_a_clear_error(spark, tmp_path):
    with pytest.raises(UserInputError, match="must hold a 'jedi_tasks' folder"):
        spark_labels(spark, tmp_path)


def test_export_then_spark_labels_then_training_history(spark, tmp_path):
    """Database -> export -> Spark labels: the history training reads is unchanged."""
    from click.testing import CliRunner

    from panda_predictor.cli.labels import labels as labels_command
    from panda_predictor.db.engine import make_engine
    from panda_predictor.db.migrations import init_database
    from panda_predictor.settings import load_settings
    from pipelines.export import export_history
    from pipelines.labels.build import build_labels, write_labels
    from pipelines.simulation import SimulationConfig, simulate_history
    from pipelines.simulation.history_writer import load_history
    from pipelines.training.dataset import history_with_labels, read_labelled_history

    settings = load_settings(home=tmp_path, db_url=f"sqlite:///{tmp_path / 'p.db'}")
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    config = SimulationConfig(n_tasks=300, n_defined=0, seed=9)
    load_history(engine, settings, simulate_history(config, progress=False))
    export_history(settings, tmp_path / "export", progress=False)
    out = tmp_path / "labels.parquet"

    result = CliRunner().invoke(
        labels_command,
        ["--engine", "spark", "--input", str(tmp_path / "export"), "--out", str(out)],
        obj=settings,
    )

    assert result.exit_code == 0, result.output
    assert "Labelled 300 tasks" in result.output
    python_out = tmp_path / "python-labels.parquet"
    write_labels(build_labels(engine, settings, progress=False), python_out)
    assert_same_labels(pd.read_parquet(out), pd.read_parquet(python_out))
    from_db = read_labelled_history(engine, settings, progress=False)
    from_file = history_with_labels(settings, out, progress=False)
    engine.dispose()
    pd.testing.assert_frame_equal(
        from_file.frame, from_db.frame, check_exact=True, check_dtype=False
    )
    assert not spark.sparkContext._jsc.sc().isStopped()  # the shared session lives on


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine", "spark"], "--engine spark needs --input DIR"),
        (["--input", "x"], "--input is read by --engine spark only"),
        (["--engine", "spark", "--input", "x", "--conf", "novalue"], "KEY=VALUE"),
    ],
)
def test_labels_command_checks_engine_options(settings, args, message):
    from click.testing import CliRunner

    from panda_predictor.cli.labels import labels as labels_command

    result = CliRunner().invoke(labels_command, args, obj=settings)
    assert result.exit_code == 2
    assert message in result.output
