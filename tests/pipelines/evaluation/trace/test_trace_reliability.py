"""The reliability figure of the trace benchmarks."""

from __future__ import annotations

import json

import pytest

from panda_predictor.core.assess.calibration_error import reliability_table
from pipelines.evaluation.trace.reliability import main, panels, score_text


def _bins(proba, y):
    return reliability_table(proba, y).to_dict()


#: Served: stated 0.9, right 9 times in 10; before calibration: stated 0.6.
SERVED = _bins([[0.9, 0.1]] * 10, [0] * 9 + [1])
BEFORE = _bins([[0.6, 0.4]] * 10, [0] * 9 + [1])
FULL = {
    "file": "LCG-2005-1.swf.gz",
    "split": {"development_run": False},
    "calibration": {
        "walltime": {
            "model:production": {
                "ece": 0.061,
                "ece_low": 0.048,
                "ece_high": 0.093,
                "n_days": 2,
            },
        },
    },
    "reliability": {
        "walltime": {"model:production": SERVED, "calibration:none": BEFORE},
        "cputime": {},
    },
}


def test_the_score_text_says_the_ece_its_interval_and_the_verdict():
    score = FULL["calibration"]["walltime"]["model:production"]
    assert score_text(score) == "ECE 0.061 (0.048-0.093 over 2 days): not met"
    assert score_text({"ece": 0.04}) == "ECE 0.040: met"
    assert score_text({"ece": 0.05}) == "ECE 0.050: met"  # the goal is "at most"
    assert score_text({}) == "" and score_text({"ece": float("nan")}) == ""


def test_a_panel_per_log_and_target_with_bins():
    got = panels([("LCG-2005-1", FULL), ("empty", {"reliability": {}})])
    assert [p["title"] for p in got] == ["LCG-2005-1\nwalltime"]
    assert got[0]["bins"]["model:production"]["accuracy"][-2] == pytest.approx(0.9)
    assert got[0]["score"]["ece"] == 0.061


def test_cli_draws_one_figure_of_every_log(tmp_path, capsys):
    sources = []
    for name in ("LCG-2005-1", "KTH-SP2-1996-2.1-cln"):
        source = tmp_path / name / "full.json"
        source.parent.mkdir()
        source.write_text(json.dumps({**FULL, "file": f"{name}.swf.gz"}))
        sources.append(str(source))
    old = tmp_path / "old" / "full.json"
    old.parent.mkdir()
    old.write_text(json.dumps({"calibration": FULL["calibration"]}))
    png = tmp_path / "img" / "reliability.png"
    assert main([*sources, str(old), "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20000
    out, err = capsys.readouterr()
    assert out.strip() == str(png)
    assert f"{old}: no reliability bins, no panel" in err


def test_cli_says_to_rerun_a_benchmark_without_bins(tmp_path, capsys):
    source = tmp_path / "full.json"
    source.write_text(json.dumps({"calibration": FULL["calibration"]}))
    with pytest.raises(SystemExit) as exit_info:
        main([str(source), "-o", str(tmp_path / "r.png")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "re-run the benchmark" in err
    assert not (tmp_path / "r.png").exists()
