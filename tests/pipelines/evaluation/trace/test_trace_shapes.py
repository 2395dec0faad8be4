"""Any real log runs or is refused clearly: unusual shapes through the benchmark."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipelines.evaluation.trace.benchmark import run_benchmark
from pipelines.evaluation.trace.log_walk import WalkForwardConfig
from tests.pipelines.evaluation.trace.test_trace_benchmark import write_trace

FAST = WalkForwardConfig(n_estimators=10)


def _no_wait(path):
    """Rewrite an SWF file so that no job records its wait time (field 3 = -1)."""
    lines = []
    for line in path.read_text().splitlines():
        if line and not line.startswith(";"):
            fields = line.split()
            fields[2] = "-1"
            line = " ".join(fields)
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return path


def _strip_header(path):
    body = [x for x in path.read_text().splitlines() if not x.startswith(";")]
    path.write_text("\n".join(body) + "\n")
    return path


def test_a_log_without_wait_times_runs_and_states_its_assumption(tmp_path, seed):
    path = _no_wait(write_trace(tmp_path / "nowait.swf", seed))
    result = run_benchmark(path, FAST)
    assert "wait time not recorded for 480 jobs" in result.report
    assert "assumed 3600 s" in result.report
    assert result.scores["walltime"]["model:production"]["n_test"] > 50


def test_a_stripped_header_runs(tmp_path, seed):
    path = _strip_header(write_trace(tmp_path / "stripped.swf", seed))
    result = run_benchmark(path, FAST)
    assert "model:production" in result.scores["walltime"]


def test_a_log_with_too_few_jobs_is_refused_clearly(tmp_path, seed):
    from panda_predictor.errors import UserInputError

    path = write_trace(tmp_path / "tiny.swf", seed, n=40)
    with pytest.raises(UserInputError, match="at least one target .* for 50 jobs"):
        run_benchmark(path, FAST)


def test_a_log_shorter_than_what_training_needs_is_reported_not_crashed(tmp_path, seed):
    path = write_trace(tmp_path / "short.swf", seed, n=58)  # 46 older jobs
    result = run_benchmark(path, FAST)
    assert result.scores == {}
    assert "no test period had enough finished history" in result.report


def test_a_test_part_crossing_a_month_boundary_retrains_per_month(tmp_path, seed):
    # 480 jobs 6 h apart on average (about 120 days): the newest 40 % span about
    # 48 days, so they cross at least one month boundary.
    path = write_trace(tmp_path / "months.swf", seed)
    config = WalkForwardConfig(n_estimators=10, test_fraction=0.4, cadence="month")
    result = run_benchmark(path, config)
    periods = result.split["test_periods"]
    assert len(periods) >= 2 and periods == sorted(periods)
    months = {p[:7] for p in periods}
    assert len(months) == len(periods)  # one retraining per calendar month
    assert result.scores["walltime"]["model:production"]["n_test"] > 150


def test_a_weekly_cadence_retrains_more_often(tmp_path, seed):
    path = write_trace(tmp_path / "cadence.swf", seed)
    result = run_benchmark(path, WalkForwardConfig(n_estimators=10, cadence="week"))
    assert len(result.split["test_periods"]) >= 3


def test_the_auto_cadence_retrains_after_the_days_each_retraining_chose(tmp_path, seed):
    path = write_trace(tmp_path / "auto.swf", seed)
    result = run_benchmark(path, WalkForwardConfig(n_estimators=10, test_fraction=0.4))
    choices = result.split["self_tuning"]
    starts = [np.datetime64(p) for p in result.split["test_periods"]]
    assert choices, "no retraining recorded its choice"
    for start, following in zip(starts, starts[1:], strict=False):
        chosen = choices[str(start)]["retrain_every_days"]
        assert (following - start) >= np.timedelta64(chosen, "D")
    for choice in choices.values():
        assert choice["retrain_every_days"] in (7, 30, 91)
        assert set(choice["half_life_days"]) == {"walltime", "cputime", "ramcount"}
    assert "self-tuning" in result.report
    early = sum(
        bool((c.get("cost") or {}).get("early_remeasure")) for c in choices.values()
    )
    assert (
        "the marked tasks re-measured after 3 settled jobs (the early "
        f"re-measurement, docs/decisions.md): in {early} of {len(choices)}"
    ) in result.report


def test_an_htcondor_history_is_benchmarked_end_to_end(tmp_path, seed):
    """condor_history -json output runs through the same predictor as SWF."""
    from click.testing import CliRunner

    from panda_predictor.cli.benchmark import benchmark
    from panda_predictor.settings import load_settings
    from tests.ingest.test_htcondor_history import make_ads, write

    path = write(tmp_path / "history.json", make_ads(seed, n=600))
    out = tmp_path / "result.json"
    result = CliRunner().invoke(
        benchmark,
        ["--log", str(path), "--json", str(out), "--no-mlflow", "--n-estimators", "10"],
        obj=load_settings(home=tmp_path / "home"),
    )
    assert result.exit_code == 0, result.output
    assert (
        "model:production" in result.output and "### replay: walltime" in result.output
    )
    doc = json.loads(out.read_text())
    assert {"walltime", "cputime", "ramcount"} <= set(doc["targets"])
