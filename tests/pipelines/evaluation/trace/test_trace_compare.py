"""The comparison of a design choice's benchmark run with its base run."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pipelines.evaluation.trace.benchmark import run_benchmark, write_outputs
from pipelines.evaluation.trace.compare import compare, load_runs, main
from pipelines.evaluation.trace.log_walk import WalkForwardConfig
from pipelines.evaluation.trace.summary import OURS, PRODUCTION
from tests.pipelines.evaluation.trace.test_trace_benchmark import write_trace


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    """Return the full.json of a small real benchmark run."""
    path = write_trace(tmp_path_factory.mktemp("trace") / "small.swf", 7)
    result = run_benchmark(path, WalkForwardConfig(n_estimators=10, test_fraction=0.4))
    folder = tmp_path_factory.mktemp("out")
    write_outputs(result, folder)
    return json.loads((folder / "full.json").read_text())


#: The development run of main kept in the repository, the base a design choice
#: is compared with (benchmarks/dev-base/README.md).
DEV_BASE = Path(__file__).resolve().parents[4] / "benchmarks" / "dev-base"


def _with(full, target, failed_above_scouts, ece):
    """Return a copy whose production row fails ``failed_above_scouts`` more of
    its jobs than the scouts and whose ECE is ``ece``."""
    changed = copy.deepcopy(full)
    rows = {o["strategy"]: o for o in changed["replay"][target]}
    rows[OURS]["failed_job_rate"] = (
        rows["scouts"]["failed_job_rate"] + failed_above_scouts
    )
    changed["calibration"][target][PRODUCTION]["ece"] = ece
    return changed


def _write(folder, log, full):
    (folder / log).mkdir(parents=True)
    (folder / log / "full.json").write_text(json.dumps(full))
    return folder


def test_a_lost_replay_goal_and_a_new_calibration_miss_are_named(full):
    target = next(iter(full["replay"]))
    base = _with(full, target, -0.001, 0.010)
    candidate = _with(full, target, +0.010, 0.200)
    lines, lost = compare({"small": base}, {"small": candidate})
    assert f"small {target}: replay failed_jobs" in lost
    assert f"small {target}: ECE 0.010 -> 0.200" in lost
    row = next(line for line in lines if line.startswith(f"| small | {target} |"))
    assert "0.010 -> 0.200" in row
    assert any(line.startswith("ECE <= 0.05:") and "worst" in line for line in lines)


def test_the_same_run_loses_nothing_and_the_command_says_so(full, tmp_path, capsys):
    _write(tmp_path / "base", "small", full)
    _write(tmp_path / "same", "small", full)
    assert main([str(tmp_path / "base"), str(tmp_path / "same")]) == 0
    assert "goals lost (0): none" in capsys.readouterr().out
    target = next(iter(full["replay"]))
    _write(tmp_path / "worse", "small", _with(full, target, +0.010, 0.200))
    _write(tmp_path / "good", "small", _with(full, target, -0.001, 0.010))
    assert main([str(tmp_path / "good"), str(tmp_path / "worse")]) == 1


def test_a_folder_without_results_is_refused_by_name(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="must hold benchmark results"):
        load_runs(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path), str(tmp_path)])
    assert exit_info.value.code == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_runs_without_a_log_in_common_are_refused(full, tmp_path, capsys):
    _write(tmp_path / "dev", "small-dev", full)
    _write(tmp_path / "test", "small", full)
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "dev"), str(tmp_path / "test")])
    assert exit_info.value.code == 2
    assert "at least one log in common" in capsys.readouterr().err


def test_the_kept_development_base_holds_every_log_and_reads_today(capsys):
    """The kept base is the ten logs' development parts, and today's compare
    reads it: a change to full.json that compare cannot read fails here, and
    the base must then be run again (its README says how)."""
    runs = load_runs(DEV_BASE)
    assert len(runs) == 10
    assert all(log.endswith("-dev") for log in runs)
    assert main([str(DEV_BASE), str(DEV_BASE)]) == 0
    out = capsys.readouterr().out
    assert "logs compared: 10\n" in out
    assert "goals lost (0): none" in out
