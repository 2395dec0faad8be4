"""The Pareto figure of a benchmark's replay."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pipelines.evaluation.trace.full_json import log_name
from pipelines.evaluation.trace.hindsight import HINDSIGHT
from pipelines.evaluation.trace.pareto import (
    _view,
    _with_hindsight,
    main,
    pareto_front,
    strategy_front,
    wasted_hours,
)


def _outcome(strategy, failed, core_h, gb_h, delay):
    return {
        "strategy": strategy,
        "n_jobs": 1000,
        "n_tasks": 100,
        "failed_job_rate": failed,
        "lost_core_hours": 0.0,
        "wasted_core_hours": core_h,
        "wasted_gb_hours": gb_h,
        "mean_bulk_delay_hours": delay,
        "mean_retry_delay_hours": 0.0,
    }


#: Four strategies per target, shaped like the issue's KTH table.
FULL = {
    "file": "KTH-SP2-1996-2.1-cln.swf.gz",
    "split": {"development_run": False},
    "replay": {
        "walltime": [
            _outcome("scouts", 0.061, 59_420.0, 0.0, 0.38),
            _outcome("predictor (model:production)", 0.138, 65_720.0, 0.0, 0.0),
            _outcome("user request", 0.047, 59_310.0, 0.0, 0.0),
            _outcome("oracle", 0.0, 0.0, 0.0, 0.0),
        ],
        "ramcount": [
            _outcome("scouts", 0.014, 0.0, 60_810.0, 0.28),
            _outcome("predictor (model:production)", 0.02, 0.0, 50_000.0, 0.0),
            _outcome("peer (tovar)", 0.013, 0.0, 61_270.0, 0.0),
            _outcome("oracle", 0.0, 0.0, 0.0, 0.0),
        ],
    },
}


def test_front_keeps_the_non_dominated_points():
    # Points (failed, wasted): a (0.1, 50) b (0.2, 40) c (0.2, 60) d (0.3, 10)
    # e (0.05, 90) f (0.3, 10) g (0.4, 45). c is dominated by a and b; g by d;
    # f ties d exactly, so both stay. By ascending failed: e, a, b, d, f.
    x = [0.1, 0.2, 0.2, 0.3, 0.05, 0.3, 0.4]
    y = [50, 40, 60, 10, 90, 10, 45]
    np.testing.assert_array_equal(pareto_front(x, y), [4, 0, 1, 3, 5])
    np.testing.assert_array_equal(pareto_front([], []), [])
    with pytest.raises(ValueError, match="1-D and of one length"):
        pareto_front([1, 2], [1])


def test_wasted_hours_are_core_hours_for_time_and_gb_hours_for_memory():
    assert wasted_hours("walltime", FULL["replay"]["walltime"])[0] == "core-h"
    unit, hours = wasted_hours("ramcount", FULL["replay"]["ramcount"])
    assert unit == "GB-h" and hours[0] == 60_810.0
    # A target the figure does not know: core-hours where there are any.
    assert wasted_hours("cputime", FULL["replay"]["ramcount"])[0] == "GB-h"


def test_log_name_comes_from_the_json_else_the_folder(tmp_path):
    source = tmp_path / "LCG-2005-1" / "full.json"
    assert log_name(FULL, source) == "KTH-SP2-1996-2.1-cln"
    dev = {**FULL, "split": {"development_run": True}}
    assert log_name(dev, source) == "KTH-SP2-1996-2.1-cln-dev"
    assert log_name({"replay": {}}, source) == "LCG-2005-1"


def test_cli_writes_one_png_per_log(tmp_path, capsys):
    source = tmp_path / "bench" / "full.json"
    source.parent.mkdir()
    source.write_text(json.dumps(FULL))
    empty = tmp_path / "quiet" / "full.json"
    empty.parent.mkdir()
    empty.write_text(json.dumps({"replay": {}}))
    out = tmp_path / "img"
    assert main([str(source), str(empty), "-o", str(out)]) == 0
    png = out / "KTH-SP2-1996-2.1-cln.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20000
    assert sorted(p.name for p in out.iterdir()) == [png.name]
    assert "no replayed target, no figure" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "must exist .* which does not exist"),
        ("{not json", "must hold JSON"),
        ("[1, 2]", "must hold a JSON object. Got list"),
    ],
    ids=["missing", "not-json", "not-an-object"],
)
def test_cli_rejects_a_bad_file_in_one_line(tmp_path, capsys, content, match):
    source = tmp_path / "full.json"
    if content is not None:
        source.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main([str(source), "-o", str(tmp_path / "img")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(match, err)


def test_cli_rejects_two_files_of_one_log(tmp_path, capsys):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "full.json").write_text(json.dumps(FULL))
    paths = [str(tmp_path / f / "full.json") for f in ("a", "b")]
    with pytest.raises(SystemExit):
        main([*paths, "-o", str(tmp_path / "img")])
    assert "more than once" in capsys.readouterr().err


def test_a_far_worse_row_does_not_stretch_the_view():
    # Scouts (0.06, 59k) and the predictor (0.11, 68k) span the view; the request
    # (0, 60k) is on the front; a rule failing 69 % of the jobs is drawn on the
    # edge instead of squashing the others into a corner.
    names = ["scouts", "predictor (model:production)", "user request", "rule (x)"]
    failed = [0.06, 0.11, 0.0, 0.69]
    wasted = [59_000.0, 68_000.0, 60_000.0, 128_000.0]
    front = [2, 0]
    (x_lo, x_hi), (y_lo, y_hi) = _view(failed, wasted, front, [0, 1, 2, 3], names)
    assert x_lo < 0.0 and 0.11 < x_hi < 0.2
    assert y_lo < 59_000 and 68_000 < y_hi < 75_000


def test_the_hindsight_row_is_drawn_but_never_on_the_front():
    # The hindsight row beats every strategy, and the oracle beats it: neither is
    # a strategy a deployment can run, so the front is scouts and the request.
    full = {
        **FULL,
        "hindsight": {
            "walltime": {"outcome": _outcome("x", 0.04, 58_000.0, 0.0, 0.03)},
        },
    }
    rows = _with_hindsight(full, "walltime", FULL["replay"]["walltime"])
    assert [r["strategy"] for r in rows][-1] == HINDSIGHT
    assert (
        _with_hindsight(full, "ramcount", FULL["replay"]["ramcount"])
        == (FULL["replay"]["ramcount"])
    )
    names = [r["strategy"] for r in rows]
    failed = [r["failed_job_rate"] for r in rows]
    wasted = [r["wasted_core_hours"] for r in rows]
    front = [names[i] for i in strategy_front(names, failed, wasted)]
    assert front == ["user request"]  # 0.047 / 59,310 beats the scouts' 0.061 / 59,420
    assert pareto_front(failed, wasted).tolist() == [3]  # the oracle, if it counted


def test_cli_draws_a_benchmark_with_its_hindsight_row(tmp_path):
    full = {
        **FULL,
        "hindsight": {
            "walltime": {"outcome": _outcome("x", 0.04, 58_000.0, 0.0, 0.03)},
            "ramcount": {"outcome": _outcome("x", 0.01, 0.0, 49_000.0, 0.02)},
        },
    }
    source = tmp_path / "bench" / "full.json"
    source.parent.mkdir()
    source.write_text(json.dumps(full))
    assert main([str(source), "-o", str(tmp_path / "img")]) == 0
    assert (tmp_path / "img" / "KTH-SP2-1996-2.1-cln.png").stat().st_size > 20000
