"""The static HTML pages: well-formed, every image referenced exists and loads."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from model_registry.gate import MetricVerdict
from model_registry.promotion import GateDecision
from model_registry.replay_table import Replay
from panda_predictor.bins_file import load_bins
from panda_predictor.core.assess.feedback import weekly_summary
from pipelines.monitoring.figures import (
    calibration_table,
    class_names,
    confusion_matrix,
    coverage_table,
    draw_confusion,
)
from pipelines.monitoring.report import (
    with_confidences,
    write_monitoring_report,
    write_retrain_summary,
)
from pipelines.monitoring.report_check import page_problems
from pipelines.monitoring.sources import latest_gate, training_reports
from pipelines.retraining.retrain import RetrainOutcome

TARGETS = ("ramcount", "cputime", "iointensity", "walltime")


def check_page(path: Path) -> list[str]:
    """Assert the page is well formed, its images decode and links exist."""
    problems, images, _ = page_problems(path)
    assert problems == []
    for src in images:
        image = matplotlib.image.imread(path.parent / src)
        assert image.shape[0] > 50 and image.shape[1] > 50
    return images


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
    for t in TARGETS:
        # Calibrated by construction: right with probability equal to confidence.
        confidence = rng.uniform(0.3, 1.0, n)
        right = rng.random(n) < confidence
        frame[f"{t}_true_class"] = rng.integers(0, 3, n)
        frame[f"{t}_pred_class"] = np.where(
            right, frame[f"{t}_true_class"], (frame[f"{t}_true_class"] + 1) % 3
        )
        frame[f"{t}_confidence"] = confidence
    return frame


def _gate_folder(home: Path) -> Path:
    """Write a training report folder with a gate.json as train_and_register does."""
    folder = home / "reports" / "train-20250201T000000Z"
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("# training report\n")
    verdicts = (
        MetricVerdict("ramcount.accuracy", "higher", 0.71, 0.69, 0.01, 0.02, True),
        MetricVerdict(
            "ramcount.under_allocation", "lower", 0.17, 0.27, 0.01, 0.0, True
        ),
        MetricVerdict("walltime.accuracy", "higher", 0.50, 0.60, 0.01, 0.02, False),
    )
    decision = GateDecision(8, "challenger", False, 7, "worse on walltime", verdicts)
    (folder / "gate.json").write_text(
        json.dumps({"version": 8, "decision": decision.to_dict()}, default=str)
    )
    return folder


def _drift_runs() -> list[dict]:
    runs = []
    for day, (psi, verdict) in enumerate(
        [(0.05, "no_drift"), (0.31, "drift"), (0.12, "too_few_outcomes")]
    ):
        runs.append(
            {
                "run_at": datetime(2025, 3, 1 + day),
                "verdict": verdict,
                "model_version": "7" if day else None,
                "features": {
                    "campaign": {"psi": psi, "threshold": 0.2, "alarm": psi > 0.2},
                    "corecount": {"psi": 0.01, "threshold": 0.25, "alarm": False},
                },
                "under_allocation": {"ramcount": 0.1 * (day + 1)},
            }
        )
    return runs


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
    gate = latest_gate(tmp_path)
    assert gate is None
    train_folder = _gate_folder(tmp_path)
    gate = latest_gate(tmp_path)
    page = write_monitoring_report(
        tmp_path / "reports" / "monitoring",
        outcomes,
        weekly_summary(outcomes),
        drift,
        decisions,
        champion_version=3,
        gate=gate,
        training_reports=training_reports(tmp_path),
        drift_runs=_drift_runs(),
    )
    images = check_page(page)
    assert set(images) == {
        "accuracy_over_time.png",
        "under_allocation_over_time.png",
        "coverage.png",
        "calibration.png",
        "coverage_accuracy.png",
        "champion_challenger.png",
        "drift.png",
        "drift_trend.png",
        "confusion.png",
    }
    text = page.read_text()
    assert "drift detected" in text and "&lt;&amp;&gt;" in text and "promoted" in text
    assert "No feedback yet" not in text and "No drift runs recorded" not in text
    assert 'href="../train-20250201T000000Z/report.md"' in text
    assert 'href="../train-20250201T000000Z/gate.json"' in text
    assert "worse on walltime" in text and "FAILED" in text
    assert "version 8 against champion 7" in text
    assert "too_few_outcomes" in text and "campaign" in text
    assert (
        gate is not None and gate.folder == train_folder and gate.champion_version == 7
    )


def test_monitoring_report_with_nothing_yet(tmp_path):
    empty = pd.DataFrame()
    page = write_monitoring_report(
        tmp_path, empty, weekly_summary(empty), None, [], None
    )
    assert check_page(page) == []
    text = page.read_text()
    assert "No feedback yet" in text and "No drift runs recorded" in text
    assert "No gate verdict yet" in text


def test_feedback_without_confidences_still_shows_feedback(tmp_path, seed):
    outcomes = _outcomes(seed).drop(columns=[f"{t}_confidence" for t in TARGETS])
    page = write_monitoring_report(
        tmp_path, outcomes, weekly_summary(outcomes), None, [], 3
    )
    text = page.read_text()
    assert "No feedback yet" not in text
    assert "No audited confidences with outcomes yet" in text
    assert "confusion.png" in check_page(page)


def test_calibration_table_bins_confidence_and_measures_accuracy():
    frame = pd.DataFrame(
        {
            "ramcount_pred_class": [1] * 10 + [2] * 10 + [0, -1],
            "ramcount_true_class": [1] * 10 + [2] * 5 + [0] * 5 + [-1, 0],
            "ramcount_confidence": [0.95] * 10 + [0.55] * 10 + [0.5, 0.9],
        }
    )
    table = calibration_table(frame, "ramcount").set_index("low")
    assert list(table["tasks"]) == [10, 10]
    assert table.loc[0.5, "accuracy"] == 0.5
    assert table.loc[0.9, "accuracy"] == 1.0
    assert table.loc[0.5, "mean_confidence"] == pytest.approx(0.55)


def test_coverage_table_shrinks_as_threshold_rises():
    frame = pd.DataFrame(
        {
            "cputime_pred_class": [0, 0, 0, 0],
            "cputime_true_class": [0, 1, 0, 0],
            "cputime_confidence": [0.2, 0.4, 0.7, 0.9],
        }
    )
    table = coverage_table(frame, "cputime", [0.0, 0.3, 0.6, 0.95])
    assert list(table["coverage"]) == [1.0, 0.75, 0.5, 0.0]
    assert list(table["accuracy"][:3]) == [0.75, pytest.approx(2 / 3), 1.0]
    assert np.isnan(table["accuracy"].iloc[3])


def test_confusion_shows_every_class_by_name_with_readable_counts():
    bins = load_bins(None)["ramcount"]
    names = class_names(bins)
    assert names[0].startswith("low") and "<1500" in names[0]
    assert "≥4000" in names[-1]
    # Class 3 (very-high) never occurs, yet it keeps its row and column.
    matrix = confusion_matrix(
        np.array([0, 0, 1, 2, -1.0]), np.array([0, 0, 1, 1, 2.0]), 4
    )
    assert matrix.shape == (4, 4) and matrix[0, 0] == 2 and matrix[1, 2] == 1
    fig, ax = plt.subplots()
    draw_confusion(ax, matrix, names)
    assert list(ax.get_xticks()) == [0, 1, 2, 3]
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    colours = {
        t.get_text(): t.get_color() for t in ax.texts if t.get_position() == (0, 0)
    }
    assert colours == {"2": "white"}
    assert {t.get_color() for t in ax.texts if t.get_text() == "0"} == {"black"}
    plt.close(fig)


def test_with_confidences_joins_on_task_id(seed):
    outcomes = _outcomes(seed).drop(columns=[f"{t}_confidence" for t in TARGETS])
    confidences = pd.DataFrame(
        {"jeditaskid": [1, 2], **{f"{t}_confidence": [0.9, 0.4] for t in TARGETS}}
    )
    joined = with_confidences(outcomes, confidences).set_index("jeditaskid")
    assert joined.loc[1, "walltime_confidence"] == 0.9
    assert np.isnan(joined.loc[5, "walltime_confidence"])
    assert len(joined) == len(outcomes)


def test_page_check_finds_broken_images_and_dead_links(tmp_path):
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "junk.png").write_bytes(b"not a png")
    page = tmp_path / "index.html"
    page.write_text(
        '<!DOCTYPE html>\n<html><body><img src="empty.png" alt="a">'
        '<img src="junk.png" alt="b"><img src="gone.png" alt="c">'
        '<a href="../nowhere/report.md">r</a><a href="https://example.org">x</a>'
        "</body></html>"
    )
    problems, _, _ = page_problems(page)
    assert len(problems) == 4, problems
    assert any("junk.png" in p and "decode" in p for p in problems)
    assert any("nowhere" in p for p in problems)


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


def test_report_joins_audited_confidences_on_both_databases(settings, db, seed):
    """Calibration needs the audit's confidence next to each outcome: read, joined."""
    from panda_predictor.db.audit_confidence import read_confidences
    from panda_predictor.db.engine import get_plugin_tables
    from panda_predictor.db.outcomes import upsert_outcomes
    from pipelines.monitoring.report import render_report

    outcomes = _outcomes(seed).head(40)
    outcomes["model_name"] = "panda-predictor"
    outcomes["evaluated_at"] = datetime(2025, 3, 1)
    audit = get_plugin_tables(settings, db).audit
    rows = [
        {
            "jeditaskid": int(r.jeditaskid),
            "model_name": "panda-predictor",
            "model_version": "3",
            "decision": r.decision,
            "predicted_at": r.predicted_at.to_pydatetime(),
            **{
                f"{t}_confidence": float(getattr(r, f"{t}_confidence")) for t in TARGETS
            },
        }
        for r in outcomes.itertuples()
    ]
    with db.begin() as conn:
        conn.execute(audit.insert(), rows)
        upsert_outcomes(
            conn,
            settings,
            outcomes.drop(columns=[f"{t}_confidence" for t in TARGETS]),
        )
    read = read_confidences(db, settings).set_index("jeditaskid")
    assert len(read) == 40
    assert read.loc[7, "cputime_confidence"] == pytest.approx(
        outcomes.set_index("jeditaskid").loc[7, "cputime_confidence"], rel=1e-6
    )
    assert read_confidences(db, settings, since=datetime(2030, 1, 1)).empty
    page = render_report(settings)
    images = check_page(page)
    assert {"calibration.png", "coverage_accuracy.png", "confusion.png"} <= set(images)
    assert "No feedback yet" not in page.read_text()


def test_a_first_gate_without_champion_says_so(tmp_path):
    folder = tmp_path / "reports" / "train-1"
    folder.mkdir(parents=True)
    verdict = MetricVerdict("mean_accuracy", "higher", 0.7, None, 0.01, 0.0, None)
    decision = GateDecision(1, "champion", True, None, "first version", (verdict,))
    (folder / "gate.json").write_text(json.dumps({"decision": decision.to_dict()}))
    gate = latest_gate(tmp_path)
    assert gate is not None and gate.rows[0]["champion"] is None
    empty = pd.DataFrame()
    page = write_monitoring_report(
        tmp_path / "out", empty, weekly_summary(empty), None, [], None, gate=gate
    )
    text = page.read_text()
    assert "(no champion to compare with)" in text and "&mdash;" in text
    assert "champion_challenger.png" in check_page(page)


def test_report_draws_the_drift_trend_from_the_database(settings, db):
    """Drift runs recorded by any process (no shared disk) make the trend section."""
    from panda_predictor.db.drift_runs import record_drift_run
    from pipelines.monitoring.report import render_report

    for day, (verdict, psi) in enumerate(
        [("no_drift", 0.05), ("too_few_outcomes", 0.4), ("drift", 0.9)]
    ):
        record_drift_run(
            db,
            settings,
            verdict=verdict,
            features={"campaign": {"psi": psi, "threshold": 0.25, "alarm": psi > 0.5}},
            under_allocation={"ramcount": 0.1 * (day + 1)},
            model_version="2",
            run_at=datetime(2026, 11, 1 + day),
        )

    page = render_report(settings)

    text = page.read_text()
    assert "No drift runs recorded" not in text
    assert "drift_trend.png" in check_page(page)
    newest = text.index("2026-11-03 00:00")
    assert text.index("2026-11-01 00:00") > newest  # newest run first
    assert "too_few_outcomes" in text


def test_the_gate_section_shows_the_decision_against_the_scouts(tmp_path):
    folder = tmp_path / "reports" / "train-2"
    folder.mkdir(parents=True)
    verdict = MetricVerdict("mean_accuracy", "higher", 0.7, None, 0.01, 0.0, None)
    decision = GateDecision(3, "champion", True, None, "replay goals met", (verdict,))
    evidence = {
        "challenger": {
            "served.delay_share": 0.125,
            "served.ramcount.failed_jobs": 0.0667,
            "served.ramcount.wasted_hours": 0.8002,
        },
        "floors": {
            "scouts": {
                "served.ramcount.failed_jobs": 0.5076,
                "served.ramcount.wasted_hours": 1.1774,
            }
        },
    }
    (folder / "gate.json").write_text(
        json.dumps({"version": 3, "decision": decision.to_dict(), "evidence": evidence})
    )
    gate = latest_gate(tmp_path)
    assert gate is not None and gate.replay.kept_scouts == 0.125
    assert gate.replay.rows[0].target == "ramcount"
    empty = pd.DataFrame()
    page = write_monitoring_report(
        tmp_path / "out", empty, weekly_summary(empty), None, [], None, gate=gate
    )
    text = page.read_text()
    assert "Version 3's decision against the scouts" in text
    row = "<tr><td>ramcount</td><td>0.067</td><td>0.508</td><td>0.8 GB-h</td>"
    assert row + "<td>1.18 GB-h</td></tr>" in text
    assert "Tasks that keep their scouts: 12.5 %" in text
    # A gate.json written before the evidence was kept shows no such table.
    (folder / "gate.json").write_text(json.dumps({"decision": decision.to_dict()}))
    older = latest_gate(tmp_path)
    assert older is not None and older.replay == Replay()
