"""``panda-predictor demo``: the main job end to end on the embedded default."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from panda_predictor.settings import Settings

if TYPE_CHECKING:
    from pipelines.demo import DemoResult


#: Rows of the demo's table of predictions.
DEMO_TABLE_ROWS = 25


@click.command("demo")
@click.option(
    "--tasks",
    "n_tasks",
    type=int,
    default=20_000,
    show_default=True,
    help="Finished tasks of simulated history to learn from.",
)
@click.option(
    "--defined",
    "n_defined",
    type=int,
    default=40,
    show_default=True,
    help="Newly defined tasks for the submit hook to predict.",
)
@click.option("--seed", type=int, default=7, show_default=True, help="Random seed.")
@click.option(
    "--keep",
    is_flag=True,
    help="Keep the existing database and MLflow store instead of starting fresh.",
)
@click.option("--no-progress", is_flag=True, help="Hide progress bars.")
@click.pass_obj
def demo(
    settings: Settings,
    n_tasks: int,
    n_defined: int,
    seed: int,
    keep: bool,
    no_progress: bool,
) -> None:
    """Simulate PanDA history, train, register, run the hook and show what it wrote.

    Uses the embedded default under the 'home' folder (./var): a SQLite PanDA
    database, a local MLflow store (sqlite:///var/mlflow.db) and the model cache.
    Takes a few minutes on 2 cores. The history is SIMULATED (docs/simulation.md).

    \b
    Examples:
      panda-predictor demo
      panda-predictor demo --tasks 3000 --defined 12 --seed 1 --no-progress
    """
    from model_registry.replay_table import (
        evidence_replay,
        replay_block,
        with_verdicts,
    )
    from panda_predictor.cli.errors import user_errors
    from panda_predictor.cli.render import predictions_table
    from pipelines.demo import run_demo

    with user_errors():
        result = run_demo(
            settings,
            n_tasks,
            n_defined,
            seed,
            fresh=not keep,
            progress=not no_progress,
            say=click.echo,
        )
    m = result.training.metrics
    click.echo(
        f"\nModel {result.training.version.name} v{result.training.version.version} "
        f"({result.training.gate.alias}): test mean accuracy "
        f"{m['mean_accuracy']:.3f}, exact match {m['joint.exact_match_rate']:.3f}; "
        f"report {result.training.report}"
    )
    replay = replay_block(
        with_verdicts(
            evidence_replay(result.training.evidence), result.training.gate.verdicts
        )
    )
    if replay:
        click.echo("\n" + "\n".join(replay))
    click.echo("\nWhat the submit hook wrote (value unit (confidence) per target):\n")
    # Applied tasks first: with the kept ones cut at DEMO_TABLE_ROWS, the demo's
    # output stays within a screen (60 lines) and still shows what was written.
    ordered = sorted(result.hook.predictions, key=lambda p: p.decision != "applied")
    click.echo(predictions_table(ordered, result.tasks, max_rows=DEMO_TABLE_ROWS))
    h = result.hook
    if h.failure:
        raise click.ClickException(f"The hook failed open: {h.failure}")
    click.echo(
        f"\n{len(h.applied)} tasks applied (scouts skipped, values written), "
        f"{len(h.kept_scouts)} kept their scouts; every decision is in "
        "pp_prediction_audit."
    )
    for line in after_hook_lines(result):
        click.echo(line)


def after_hook_lines(result: DemoResult) -> list[str]:
    """Return what the feedback, the drift check and the report found, briefly."""
    if result.feedback is None:
        return []
    weekly = result.feedback.weekly
    lines = [
        f"\nThen their {result.jobs_run} simulated jobs ran: feedback scored "
        f"{result.feedback.written} of {result.feedback.audited} audited tasks."
    ]
    if not weekly.empty:
        parts = []
        for target, rows in weekly.groupby("target", sort=False):
            scored = rows["scored"].sum()
            if scored:
                acc = (rows["accuracy"] * rows["scored"]).sum() / scored
                under = (rows["under_allocation"] * rows["scored"]).sum() / scored
                parts.append(f"{target} {acc:.2f}/{under:.2f}")
        lines.append("  accuracy/under-allocation: " + ", ".join(parts))
    if result.drift is not None:
        drift = result.drift.result
        verdict = "drift" if drift.drifted else "no drift"
        why = "; ".join(drift.reasons[:2]) + ("; ..." if len(drift.reasons) > 2 else "")
        lines.append(f"Drift check: {verdict}" + (f" ({why})" if why else ""))
    if result.report is not None:
        lines.append(f"Monitoring report: {result.report}")
    return lines
