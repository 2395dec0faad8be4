"""The summary figure of the trace benchmarks."""

from __future__ import annotations

import json

import pytest

from pipelines.evaluation.trace.figure import _rows, draw, main


def _scores(f1, under):
    return {"macro_f1": f1, "under_allocation": under}


DOC = {
    "file": "KTH-SP2-1996-2.1-cln.swf.gz",
    "full_scores": {
        "walltime": {
            "model:xgboost": _scores(0.62, 0.09),
            "model:xgboost_anchored": _scores(0.61, 0.08),
            "baseline:user_max5_ratio": _scores(0.56, 0.05),
            "baseline:request": _scores(0.35, 0.0),
        }
    },
    "macro_f1_lead": {
        "walltime": {
            "model": "model:xgboost",
            "baseline": "baseline:user_max5_ratio",
            "margin": 0.06,
            "low": 0.02,
            "high": 0.09,
            "n_days": 90,
        }
    },
}


def test_rows_name_file_and_target():
    ((label, scores, lead),) = _rows([DOC])
    assert label == "KTH-SP2\nwalltime" and lead["low"] == 0.02
    assert set(scores) == set(DOC["full_scores"]["walltime"])


def test_draw_writes_a_png(tmp_path):
    source = tmp_path / "full.json"
    source.write_text(json.dumps(DOC))
    out = tmp_path / "img" / "traces.png"
    assert main([str(source), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
    with pytest.raises(ValueError, match="at least one target"):
        draw([], tmp_path / "none.png")
