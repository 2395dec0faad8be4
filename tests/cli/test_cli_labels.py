"""The labels pipeline and the ``labels`` command against real SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from panda_predictor.bins_file import load_bins
from panda_predictor.cli.labels import labels as labels_command
from panda_predictor.core.label_values import LABEL_COLUMNS
from panda_predictor.core.labels import labels_frame
from tests.core.test_labels import load_history, make_history


def test_labels_command_writes_parquet_and_fits_bins(settings, seed, tmp_path):
    tasks, jobs = make_history(seed, n_tasks=50)
    jobs = jobs[jobs["jeditaskid"].isin(tasks["jeditaskid"])]
    load_history(settings, tasks, jobs)
    out, bins_path = tmp_path / "out" / "labels.parquet", tmp_path / "bins.yaml"

    result = CliRunner().invoke(
        labels_command,
        [
            "--out",
            str(out),
            "--fit-bins",
            str(bins_path),
            "--chunk-size",
            "7",
            "--no-progress",
        ],
        obj=settings,
    )

    assert result.exit_code == 0, result.output
    assert "Labelled 50 tasks" in result.output
    stored = pd.read_parquet(out)
    assert list(stored.columns) == list(LABEL_COLUMNS)
    expected = labels_frame(jobs, tasks)
    assert stored["jeditaskid"].tolist() == expected["jeditaskid"].tolist()
    assert stored["n_scouts"].tolist() == expected["n_scouts"].tolist()
    for name in ("ramcount", "cputime", "iointensity", "walltime"):
        np.testing.assert_allclose(
            stored[name], expected[name], rtol=1e-9, err_msg=name
        )
    bins = load_bins(bins_path)
    assert bins.version.startswith("fitted-")
    assert bins["ramcount"].n_classes == 4
    assert bins["iointensity"].edges == (500.0,)


def test_labels_command_on_empty_history(settings, tmp_path):
    load_history(settings, pd.DataFrame(), pd.DataFrame())
    out = tmp_path / "labels.parquet"
    result = CliRunner().invoke(
        labels_command, ["--out", str(out), "--no-progress"], obj=settings
    )
    assert result.exit_code == 0, result.output
    assert len(pd.read_parquet(out)) == 0


def test_fit_bins_without_scouts_is_a_clear_error(settings, tmp_path):
    tasks, jobs = make_history(2, n_tasks=3)
    load_history(settings, tasks, jobs.iloc[:0])
    result = CliRunner().invoke(
        labels_command,
        [
            "--out",
            str(tmp_path / "l.parquet"),
            "--fit-bins",
            str(tmp_path / "b.yaml"),
            "--no-progress",
        ],
        obj=settings,
    )
    assert result.exit_code == 1
    assert "must hold at least one task with scout measurements" in result.output
    assert not (tmp_path / "b.yaml").exists()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param(
            ["--chunk-size", "0"], "0 is not in the range x>=1", id="chunk-size-zero"
        )
    ],
)
def test_labels_command_rejects_bad_options(settings, args, match):
    result = CliRunner().invoke(labels_command, args, obj=settings)
    assert result.exit_code == 2
    assert match in result.output


def test_labels_command_sql_engine_matches_python_or_says_why(settings, tmp_path):
    tasks, jobs = make_history(5, n_tasks=40)
    jobs = jobs[jobs["jeditaskid"].isin(tasks["jeditaskid"])]
    load_history(settings, tasks, jobs)
    out = tmp_path / "sql.parquet"

    result = CliRunner().invoke(
        labels_command,
        ["--engine", "sql", "--chunk-size", "9", "--out", str(out), "--no-progress"],
        obj=settings,
    )

    if settings.db_url.startswith("sqlite"):
        assert result.exit_code == 1
        assert "'sqlite' database lacks" in result.output
        return
    assert result.exit_code == 0, result.output
    stored = pd.read_parquet(out)
    expected = labels_frame(jobs, tasks)
    assert stored["jeditaskid"].tolist() == expected["jeditaskid"].tolist()
    for name in ("ramcount", "cputime", "iointensity", "walltime"):
        np.testing.assert_allclose(stored[name], expected[name], rtol=1e-9)
