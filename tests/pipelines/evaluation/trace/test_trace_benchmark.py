"""Trace features, the walk-forward split and the benchmark command end to end."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from panda_predictor.core.decide.calibration import DEFAULT_METHOD
from panda_predictor.ingest.swf import read_swf
from pipelines.evaluation.trace.log_walk import WalkForwardConfig, run_walk_forward

LEAKY = {
    "wait_s",
    "run_s",
    "cpu_s",
    "used_memory_mb",
    "used_memory_total_mb",
    "finish_s",
    "procs",
    "status",
}


def write_trace(path, seed, n=480, mean_gap_h=6.0):
    """Write a synthetic SWF log: 4 users whose run time and memory follow them."""
    rng = np.random.default_rng(seed)
    lines = ["; UnixStartTime: 820454400", "; Note: synthetic"]
    t = 0.0
    for i in range(1, n + 1):
        t += rng.exponential(mean_gap_h * 3600)
        user = int(rng.integers(0, 4))
        run = float(np.exp(rng.normal(5 + 1.5 * user, 0.4)))
        mem = int(1000 * (user + 1) * rng.uniform(0.8, 1.2))
        req = int(run * rng.uniform(1.5, 4))
        wait = int(rng.exponential(600))
        lines.append(
            f"{i} {int(t)} {wait} {int(run)} 2 {int(run * 0.9)} {mem} 2 {req} "
            f"{mem * 2} 1 {user} 1 {user + 10} {user % 2} 1 -1 -1"
        )
    lines.append("")
    path.write_text("\n".join(lines))
    return path


@pytest.fixture
def trace(tmp_path, seed):
    return write_trace(tmp_path / "synthetic.swf", seed)


def _features_of(frame):
    """Return the production features of every job, as of its submission."""
    from panda_predictor.core.features.pipeline import FeaturePipeline
    from panda_predictor.ingest.to_panda import jobs_to_tasks

    tasks = jobs_to_tasks(frame)
    pipeline = FeaturePipeline(targets=("walltime", "cputime", "ramcount"))
    return pipeline.fit(tasks, tasks).transform(tasks, tasks)


def test_no_post_submission_field_reaches_the_features(trace):
    frame, _ = read_swf(trace)
    before = _features_of(frame)
    assert not LEAKY & set(before.columns)
    # Change the last job's own wait, run, CPU time and memory: its features (known
    # at submission) must not move, nor those of any job submitted before it ended.
    changed = frame.copy()
    last = len(frame) - 1
    for col, factor in (
        ("wait_s", 50),
        ("run_s", 9),
        ("cpu_s", 9),
        ("used_memory_mb", 9),
    ):
        changed.loc[last, col] = changed.loc[last, col] * factor + 1
    changed["finish_s"] = changed["submit_s"] + changed["wait_s"] + changed["run_s"]
    after = _features_of(changed)
    pd.testing.assert_series_equal(after.iloc[last], before.iloc[last])
    # ...and a job that finished before the last submission does change it, so the
    # check above can fail.
    earlier = frame.copy()
    same_user = frame.index[frame["user"] == frame["user"].iloc[last]][-3]
    earlier.loc[same_user, "run_s"] = 1.0
    earlier["finish_s"] = earlier["submit_s"] + earlier["wait_s"] + earlier["run_s"]
    moved = _features_of(earlier)
    assert not moved.iloc[last].equals(before.iloc[last])


def test_a_jobs_own_outcome_never_changes_its_production_prediction(trace):
    """The combination's leakage rule: a task is judged on records known before it."""
    frame, _ = read_swf(trace)
    config = WalkForwardConfig(n_estimators=20, test_fraction=0.3)
    base = run_walk_forward(frame, ["walltime"], config).runs["walltime"]
    last_row = base.rows[-1]
    changed = frame.copy()
    changed.loc[last_row, "run_s"] = changed.loc[last_row, "run_s"] * 50 + 7
    changed["finish_s"] = changed["submit_s"] + changed["wait_s"] + changed["run_s"]
    again = run_walk_forward(changed, ["walltime"], config).runs["walltime"]
    for name in ("model:production", "model:xgboost"):
        assert again.predicted[name][-1] == base.predicted[name][-1]
        assert again.confidence[name][-1] == base.confidence[name][-1]
    assert again.y_true[-1] != base.y_true[-1]  # the truth did move


@pytest.mark.parametrize("history_days", [None, 10_000])
def test_tasks_older_than_the_hooks_window_change_no_prediction(
    tmp_path, seed, history_days
):
    """A period is predicted with the hook's history window (180 days), not all.

    The log spans about 480 days; its test part is the newest 20 %. Every job
    submitted in the first 150 days gets a user of its own: outside the training
    rows (``max_train_rows``) and older than 180 days before any test period, it
    must not move a test task's features, prediction or confidence. With a window
    of 10,000 days the same change does move them (the check can fail).
    """
    frame, _ = read_swf(write_trace(tmp_path / "long.swf", seed, mean_gap_h=24))
    config = WalkForwardConfig(n_estimators=20, max_train_rows=150, max_periods=4)
    if history_days is not None:
        config = replace(config, history_days=history_days)
    days = (frame["submit_time"] - frame["submit_time"].min()).dt.days
    assert days.max() > 400
    changed = frame.copy()
    changed["user"] = changed["user"].cat.add_categories(["old"])
    changed.loc[days < 150, "user"] = "old"

    base = run_walk_forward(frame, ["walltime"], config).runs["walltime"]
    again = run_walk_forward(changed, ["walltime"], config).runs["walltime"]
    assert base.rows.size > 20 and np.array_equal(again.rows, base.rows)
    same = all(
        np.array_equal(again.predicted[name], base.predicted[name])
        and np.array_equal(again.confidence[name], base.confidence[name])
        for name in ("model:production", "model:xgboost")
    )
    assert same == (history_days is None)


@pytest.mark.parametrize("step_days", [1.0, 10_000.0])
def test_each_task_is_served_the_window_of_its_own_day(
    tmp_path, seed, monkeypatch, step_days
):
    """The hook reads the 180 days before each task; the walk moves the window on
    every day, so no task sees more than a day of older history than that.

    With one step per period (10,000 days) a task late in a 30- or 91-day period
    would see the window of the period's first task: the check can fail.
    """
    from pipelines.evaluation.trace import log_walk

    frame, _ = read_swf(write_trace(tmp_path / "long.swf", seed, mean_gap_h=24))
    config = WalkForwardConfig(
        n_estimators=20,
        max_train_rows=150,
        max_periods=3,
        history_days=60,
        window_step_days=step_days,
    )
    served = []
    original = log_walk.served_history

    def spy(tasks, created, step, days):
        history = original(tasks, created, step, days)
        served.append((created[step], history.frame["creationdate"].min()))
        return history

    monkeypatch.setattr(log_walk, "served_history", spy)
    run = run_walk_forward(frame, ["walltime"], config).runs["walltime"]
    assert sum(c.size for c, _ in served) == run.rows.size > 20
    late = [
        (pd.Timestamp(c.max()) - oldest) / pd.Timedelta(days=1) for c, oldest in served
    ]
    within_a_day = max(late) <= 60 + 1
    assert within_a_day == (step_days == 1.0)


def test_serving_steps_cut_a_period_by_days_of_creation():
    from pipelines.evaluation.trace.log_walk import serving_steps

    hours = np.array([0, 5, 23, 24, 30, 72, 200], dtype="timedelta64[h]")
    created = np.datetime64("2020-01-01T00:00") + hours[[3, 0, 6, 1, 4, 2, 5]]
    rows = np.arange(created.size)
    steps = serving_steps(created, rows, 1.0)
    assert [s.tolist() for s in steps] == [[1, 3, 5], [0, 4], [6], [2]]
    assert [s.tolist() for s in serving_steps(created, rows, 10.0)] == [rows.tolist()]
    assert len(serving_steps(created, rows, 1e-15)) == rows.size  # never empty
    with pytest.raises(ValueError, match="'window_step_days' .* Got 0"):
        serving_steps(created, rows, 0)


def test_the_served_methods_refit_is_the_production_distribution(trace):
    """Each calibration method is refitted and scored beside production; the
    served one, built as the served route builds it, must give its very bits."""
    frame, _ = read_swf(trace)
    run = run_walk_forward(
        frame, ["walltime"], WalkForwardConfig(n_estimators=20)
    ).runs["walltime"]
    served = run.distribution["model:production"]
    assert served.shape[0] == run.rows.size and served.any()
    np.testing.assert_array_equal(
        run.distribution[f"calibration:{DEFAULT_METHOD}"], served
    )
    # Another method is a different map (so the check can fail).
    assert not np.array_equal(run.distribution["calibration:isotonic"], served)


def test_walk_forward_trains_only_on_the_past(trace):
    frame, _ = read_swf(trace)
    result = run_walk_forward(frame, ["walltime"], WalkForwardConfig(n_estimators=20))
    run = result.runs["walltime"]
    split = result.split
    assert split["train_end"] < split["test_start"]
    assert frame["submit_time"].iloc[run.rows].min() >= np.datetime64(
        split["test_start"]
    )
    assert split["n_train"] + split["n_test"] == len(frame)
    assert 0.15 < split["n_test"] / len(frame) < 0.25
    assert (run.predicted["model:production"] >= 0).all()  # every test job predicted
    assert run.followed is not None and (run.followed >= 0).all()
    assert run.applied["model:production"].any()  # some tasks skip their scouts


def test_benchmark_command_end_to_end(tmp_path, trace):
    from panda_predictor.cli.benchmark import benchmark
    from panda_predictor.settings import load_settings

    settings = load_settings(
        home=tmp_path / "home", mlflow_tracking_uri=f"sqlite:///{tmp_path / 'ml.db'}"
    )
    out = tmp_path / "result.json"
    result = CliRunner().invoke(
        benchmark,
        [
            "--swf",
            str(trace),
            "--json",
            str(out),
            "--test-fraction",
            "0.3",
            "--n-estimators",
            "20",
        ],
        obj=settings,
    )
    assert result.exit_code == 0, result.output
    assert "### walltime" in result.output and "### replay: ramcount" in result.output
    doc = json.loads(out.read_text())
    assert set(doc) == {"file", "split", "targets"}
    assert set(doc["targets"]) == {"walltime", "cputime", "ramcount"}
    for per_name in doc["targets"].values():
        assert "model:production" in per_name
        assert "baseline:user_last2_mean" in per_name
        assert all(n.startswith(("model:", "baseline:")) for n in per_name)
        for scores in per_name.values():
            assert set(scores) == {
                "accuracy",
                "macro_f1",
                "top_class_recall",
                "top_class_precision",
                "under_allocation",
                "over_allocation",
            }
    folder = tmp_path / "home" / "benchmarks" / "synthetic"
    assert (folder / "report.md").is_file()
    # The log's own figures, linked from its report and named in the output.
    report = (folder / "report.md").read_text()
    for png in ("pareto.png", "reliability.png"):
        assert (folder / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in report
    assert f"Written to {folder}: report.md, full.json, pareto.png, " in result.output
    assert "where model:production and the scouts differ" in result.output
    full = json.loads((folder / "full.json").read_text())
    for target in ("walltime", "ramcount"):
        # The breakdown counts the same jobs as the replay's production row.
        row = next(
            r
            for r in full["replay"][target]
            if r["strategy"] == "predictor (model:production)"
        )
        hours = "wasted_core_hours" if target == "walltime" else "wasted_gb_hours"
        for groups in full["replay_difference"][target].values():
            assert sum(g["jobs"] for g in groups) == row["n_jobs"]
            assert sum(g["failed"] for g in groups) == round(
                row["failed_job_rate"] * row["n_jobs"]
            )
            assert sum(g["wasted_hours"] for g in groups) == pytest.approx(row[hours])
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=settings.tracking_uri())
    experiment = client.get_experiment_by_name("panda-predictor-traces")
    runs = client.search_runs([experiment.experiment_id])
    assert runs and "walltime.model.production.macro_f1" in runs[0].data.metrics


def test_ingest_command_writes_parquet(tmp_path, trace):
    from panda_predictor.cli.ingest import ingest
    from panda_predictor.settings import load_settings

    settings = load_settings(home=tmp_path / "home")
    result = CliRunner().invoke(ingest, ["swf", str(trace)], obj=settings)
    assert result.exit_code == 0, result.output
    assert "jobs: 480" in result.output and "target iointensity: not available" in (
        result.output
    )
    frame = pd.read_parquet(tmp_path / "home" / "traces" / "synthetic.parquet")
    assert len(frame) == 480
    from panda_predictor.core.features.pipeline import TASK_COLUMNS

    # The hook's task and history schema: task columns, labels, when known.
    assert set(TASK_COLUMNS) <= set(frame.columns)
    assert (frame["labels_known_at"] > frame["creationdate"]).all()
    assert frame["walltime"].notna().all() and frame["iointensity"].isna().all()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ([], "exactly one of --log FILE or --all DIR"),
        (["--swf", "/nonexistent.swf"], "must exist"),
    ],
    ids=["no-input", "missing-file"],
)
def test_benchmark_errors(tmp_path, args, match):
    from panda_predictor.cli.benchmark import benchmark
    from panda_predictor.settings import load_settings

    result = CliRunner().invoke(
        benchmark, [*args, "--no-mlflow"], obj=load_settings(home=tmp_path)
    )
    assert result.exit_code != 0 and match in result.output


def test_all_goes_on_past_a_log_it_cannot_benchmark_and_names_what_it_passed(
    tmp_path, seed
):
    """--all over logs nobody here has seen: one log's fault loses no other."""
    from panda_predictor.cli.benchmark import benchmark
    from panda_predictor.settings import load_settings

    logs = tmp_path / "logs"
    logs.mkdir()
    # "a_burst" sorts first: its error must not stop the good log after it.
    burst = [
        f"{i} 1000 60 {100 + i} 1 -1 -1 1 3600 -1 1 1 1 1 1 1 -1 -1"
        for i in range(1, 301)
    ]
    (logs / "a_burst.swf").write_text("\n".join(burst) + "\n")
    write_trace(logs / "b_good.swf", seed)
    (logs / "site.log").write_text("1 0 10 100 1 -1 -1 1 3600 -1 1 1 1 1 1 1 -1 -1\n")
    result = CliRunner().invoke(
        benchmark,
        ["--all", str(logs), "--no-mlflow", "--n-estimators", "20"],
        obj=load_settings(home=tmp_path / "home"),
    )
    out = result.output
    assert "Benchmarking 2 job logs: a_burst.swf, b_good.swf" in out
    assert "Passed over 1 file (site.log)" in out
    assert "Not benchmarked: a_burst.swf: " in out
    assert "submit times must spread enough" in out
    assert (tmp_path / "home" / "benchmarks" / "b_good" / "report.md").is_file()
    assert result.exit_code == 1
    assert "1 of 2 logs not benchmarked (the reasons are above): a_burst.swf." in out


def test_a_log_submitted_in_one_second_gets_a_clear_error(tmp_path):
    """No time split exists; the command says so and names the log's fault."""
    from panda_predictor.cli.benchmark import benchmark
    from panda_predictor.settings import load_settings

    lines = [
        f"{i} 1000 60 {100 + i} 1 -1 -1 1 3600 -1 1 {i % 3} 1 1 1 1 -1 -1"
        for i in range(1, 301)
    ]
    path = tmp_path / "burst.swf"
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(
        benchmark,
        ["--log", str(path), "--no-mlflow"],
        obj=load_settings(home=tmp_path),
    )
    assert result.exit_code != 0
    assert "submit times must spread enough" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
