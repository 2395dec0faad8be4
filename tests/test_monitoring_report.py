"""The static HTML pages: well-formed, every image referenced exists and loads."""

from __future__ import annotations

from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
from click.testing import CliRunner

from panda_predictor.core.feedback import weekly_summary
from pipelines.monitoring_report import write_monitoring_report, write_retrain_summary
from pipelines.retrain import RetrainOutcome

VOID = {"meta", "img", "br", "hr", "link", "input"}


class _Checker(HTMLParser):
    """Collect image sources and check that tags nest properly."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.images: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])
            if not dict(attrs).get("alt"):
                self.errors.append("img without alt")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()


def check_page(path: Path) -> list[str]:
    """Assert the page is well formed and its images load; return their names."""
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    checker = _Checker()
    checker.feed(text)
    assert checker.errors == [] and checker.stack == []
    for src in checker.images:
        image = matplotlib.image.imread(path.parent / src)
        assert image.shape[0] > 50 and image.shape[1] > 50
    return checker.images


def _outcomes(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 300
    frame = pd.DataFrame(
        {
            "jeditaskid": np.arange(n),
            "model_version": "3",
            "decision": rng.choice(["applied", "kept_scouts"], n),
            "predicted_at": [
                datetime(2025, 1, 6) + timedelta(hours=5 * i) for i in range(n)
            ],
            "n_failed_memory": rng.integers(0, 2, n),
            "n_failed_time": 0,
            "mem_requested_gbh": 10.0,
            "mem_used_gbh": rng.uniform(2, 9, n),
        }
    )
    for t in ("ramcount", "cputime", "iointensity", "walltime"):
        frame[f"{t}_true_class"] = rng.integers(0, 4, n)
        frame[f"{t}_pred_class"] = np.clip(
            frame[f"{t}_true_class"] + rng.integers(-1, 2, n), 0, 3
        )
    return frame


def test_monitoring_report_with_everything(tmp_path, seed):
    outcomes = _outcomes(seed)
    drift = {
        "since": "2025-01-01",
        "until": "2025-02-01",
        "n_tasks": 900,
        "drifted": True,
        "reasons": ["feature transhome: unseen 0.3 <&>"],
        "features": [
            {"feature": "transhome", "psi": 2.0, "drifted": True},
            {"feature": "corecount", "psi": 0.01, "drifted": False},
        ],
    }
    decisions = [
        {
            "until": "2025-02-01",
            "status": "promoted",
            "version": 3,
            "champion_version": 2,
            "reason": "not worse",
        }
    ]
    page = write_monitoring_report(
        tmp_path / "r",
        outcomes,
        weekly_summary(outcomes),
        drift,
        decisions,
        champion_version=3,
    )
    images = check_page(page)
    assert set(images) == {
        "accuracy_over_time.png",
        "under_allocation_over_time.png",
        "coverage.png",
        "drift.png",
        "confusion.png",
    }
    text = page.read_text()
    assert "drift detected" in text and "&lt;&amp;&gt;" in text and "promoted" in text


def test_monitoring_report_with_nothing_yet(tmp_path):
    empty = pd.DataFrame()
    page = write_monitoring_report(
        tmp_path, empty, weekly_summary(empty), None, [], None
    )
    assert check_page(page) == []
    assert "No feedback yet" in page.read_text()


def test_retrain_summary_page(tmp_path):
    metrics = {
        f"{t}.{m}": 0.5
        for t in ("ramcount", "cputime", "iointensity", "walltime")
        for m in ("accuracy", "under_allocation", "macro_f1", "tail_recall")
    }
    outcome = RetrainOutcome(
        "refused",
        datetime(2024, 7, 1),
        datetime(2025, 7, 1),
        "abc",
        4,
        3,
        "worse than champion on ramcount.accuracy",
        metrics,
        {**metrics, "ramcount.accuracy": 0.7},
    )
    page = write_retrain_summary(tmp_path / "s", outcome)
    assert check_page(page) == ["comparison.png"]
    assert "refused" in page.read_text() and "0.7" in page.read_text()


def test_report_cli_on_an_empty_database(settings):
    from panda_predictor.cli.report import report
    from panda_predictor.db.engine import make_engine
    from panda_predictor.db.migrations import init_database

    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    engine.dispose()
    result = CliRunner().invoke(report, [], obj=settings)
    assert result.exit_code == 0, result.output
    page = settings.home / "reports" / "monitoring" / "index.html"
    assert str(page) in result.output
    check_page(page)
