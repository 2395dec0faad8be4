"""``panda-predictor drift``: compare recent tasks and feedback with the champion."""

from __future__ import annotations

import sys
from datetime import datetime

import click

from panda_predictor.core.assess.drift_verdict import (
    DRIFT,
    NO_DRIFT,
    TOO_FEW_OUTCOMES,
    DriftResult,
)
from panda_predictor.settings import Settings


@click.command("drift")
@click.option(
    "--since",
    type=click.DateTime(),
    default=None,
    help="Start of the window of task creation (default: --days before).",
)
@click.option(
    "--until",
    type=click.DateTime(),
    default=None,
    help="End of the window (default: now).",
)
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Length of the default window.",
)
@click.option(
    "--feedback-days",
    type=click.IntRange(min=1),
    default=28,
    show_default=True,
    help="Sliding window of feedback outcomes.",
)
@click.option(
    "--no-classes",
    is_flag=True,
    help="Skip the predicted-class distribution (no model run).",
)
@click.pass_obj
def drift(
    settings: Settings,
    since: datetime | None,
    until: datetime | None,
    days: int,
    feedback_days: int,
    no_classes: bool,
) -> None:
    """Check recent submissions and feedback for drift from the champion's training.

    Per feature: population stability index against its threshold, whether the
    feature can raise the alarm, and the share of categories never seen in training;
    per target: PSI of the predicted classes and feedback accuracy and
    under-allocation against the model's test figures. The verdict is drift,
    no_drift or too_few_outcomes (fewer recent tasks or scored outcomes than
    drift_min_tasks). Keeps the run in the database table pp_drift_run (the service's
    /metrics shows the last one), logs it in the MLflow experiment
    'panda-predictor-monitoring' and writes <home>/monitoring/drift-*.json.

    \b
    Exit codes: 0 no drift or too few outcomes, 3 drift detected, 1 error.
    Example:
      panda-predictor drift --days 14 || panda-predictor retrain
    """
    from panda_predictor.cli.errors import user_errors
    from pipelines.monitoring.drift import DRIFT_EXIT_CODE, check_drift

    with user_errors():
        run = check_drift(
            settings, since, until, days, feedback_days, classify=not no_classes
        )
    result = run.result
    click.echo(
        f"Window {run.since:%Y-%m-%d %H:%M} .. {run.until:%Y-%m-%d %H:%M}: "
        f"{result.n_tasks} tasks, {result.n_outcomes} scored outcomes, champion "
        f"version {run.model_version}."
    )
    for line in drift_lines(result):
        click.echo(line)
    if result.verdict == DRIFT:
        click.echo("Drift detected: " + "; ".join(result.reasons))
        sys.exit(DRIFT_EXIT_CODE)
    if result.verdict == NO_DRIFT:
        click.echo("No drift detected.")
    else:
        click.echo(
            "No drift in what was measured, but too few tasks or outcomes for a "
            f"verdict (minimum {result.min_outcomes})."
        )


def drift_lines(result: DriftResult) -> list[str]:
    """Return the per-feature table, the class and outcome lines and the verdict."""
    lines = [
        f"  {'feature':18s} {'PSI':>7s} {'threshold':>9s}  {'can alarm':10s}  "
        f"{'unseen':>6s}  state"
    ]
    for f in result.features:
        alarm = "+".join(
            kind
            for kind, on in (("PSI", f.psi_alarm), ("unseen", f.unseen_alarm))
            if on
        )
        if f.drifted:
            state = "DRIFT"
        elif f.psi_shifted:
            state = "above threshold, reported only"
        else:
            state = "ok"
        lines.append(
            f"  {f.feature:18s} {f.psi:7.3f} {f.threshold:9.3f}  {alarm or 'no':10s}  "
            f"{f.unseen_share:6.3f}  {state}"
        )
    for target, value in result.classes.items():
        flag = "  DRIFT" if value > result.class_psi_limit else ""
        lines.append(
            f"  predicted {target:12s} PSI {value:7.3f} (threshold "
            f"{result.class_psi_limit:.3f}){flag}"
        )
    for p in result.performance:
        if p.n:
            lines.append(
                f"  feedback {p.target:12s} {p.n} scored, accuracy {p.accuracy:.3f} "
                f"(test {p.test_accuracy:.3f}), under-allocation "
                f"{p.under_allocation:.3f} (test {p.test_under_allocation:.3f})"
                + (f": {p.reason}" if p.reason else "")
            )
    words = {DRIFT: "drift", NO_DRIFT: "no drift", TOO_FEW_OUTCOMES: ""}
    tasks = words[result.task_verdict] or (
        f"too few tasks for a verdict ({result.n_tasks}, minimum {result.min_outcomes})"
    )
    outcomes = words[result.outcome_verdict] or (
        f"too few outcomes for a verdict ({result.n_outcomes} scored, minimum "
        f"{result.min_outcomes})"
    )
    lines.append(f"Tasks: {tasks}. Outcomes: {outcomes}.")
    lines.append(f"Verdict: {result.verdict}")
    return lines
