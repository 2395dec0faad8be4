"""What ``panda-predictor demo`` prints after the hook: feedback, drift, report."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from panda_predictor.cli.demo import after_hook_lines


def _result(feedback=None, drift=None, report=None):
    """A stand-in of pipelines.demo.DemoResult with only what the lines read."""
    return SimpleNamespace(feedback=feedback, drift=drift, report=report, jobs_run=12)


def test_without_feedback_nothing_is_added():
    assert after_hook_lines(_result(report="r.html")) == []


def test_accuracy_and_under_allocation_are_weighted_by_scored_tasks():
    weekly = pd.DataFrame(
        {
            "target": ["ramcount", "ramcount", "walltime"],
            "scored": [1, 3, 0],
            "accuracy": [1.0, 0.6, 0.9],
            "under_allocation": [0.0, 0.2, 0.5],
        }
    )
    feedback = SimpleNamespace(weekly=weekly, written=4, audited=5)

    lines = after_hook_lines(_result(feedback=feedback))

    assert "12 simulated jobs ran: feedback scored 4 of 5 audited" in lines[0]
    # (1*1.0 + 3*0.6) / 4 = 0.70 and (3*0.2) / 4 = 0.15; walltime scored nothing.
    assert lines[1] == "  accuracy/under-allocation: ramcount 0.70/0.15"


def test_drift_names_two_reasons_at_most_and_the_report_its_path():
    feedback = SimpleNamespace(weekly=pd.DataFrame(), written=0, audited=0)
    reasons = ["psi of ramcount", "accuracy fell", "too few tasks"]
    drift = SimpleNamespace(result=SimpleNamespace(drifted=True, reasons=reasons))

    lines = after_hook_lines(_result(feedback, drift, report="var/report.html"))

    assert lines[1:] == [
        "Drift check: drift (psi of ramcount; accuracy fell; ...)",
        "Monitoring report: var/report.html",
    ]


def test_no_drift_without_reasons_is_one_short_line():
    feedback = SimpleNamespace(weekly=pd.DataFrame(), written=0, audited=0)
    drift = SimpleNamespace(result=SimpleNamespace(drifted=False, reasons=[]))
    assert after_hook_lines(_result(feedback, drift))[-1] == "Drift check: no drift"
