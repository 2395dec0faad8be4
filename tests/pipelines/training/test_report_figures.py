"""The training report's figures render to PNG files."""

from __future__ import annotations

import numpy as np

from panda_predictor.core.assess.evaluation import evaluate_target
from pipelines.training.report_figures import plot_confusion, save_png


def test_a_confusion_matrix_renders_to_a_png(tmp_path):
    ev = evaluate_target(
        np.array([0, 1, 2, 2, 1]), np.array([0, 2, 2, 2, 1]), 3, "ramcount"
    )
    fig = plot_confusion(ev, "xgboost")
    path = tmp_path / "confusion.png"
    save_png(fig, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 1000
