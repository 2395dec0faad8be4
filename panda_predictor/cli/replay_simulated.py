"""``panda-predictor replay-simulated``: the cost of scouts vs prediction, simulated."""

from __future__ import annotations

import click


@click.command("replay-simulated")
@click.option(
    "--tasks",
    default=20000,
    show_default=True,
    type=int,
    help="Simulated finished tasks (the newest 10 % are replayed).",
)
@click.option("--seed", default=1, show_default=True, type=int, help="Random seed.")
@click.option(
    "--delay-price",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Replace the delay price training chose (core-hours per core-hour of a "
    "job's delay), to see what that choice costs. Default: training's choice.",
)
def replay_simulated_command(tasks: int, seed: int, delay_price: float | None) -> None:
    """Replay simulated jobs' memory under scouts, the predictor and an oracle.

    Trains a small XGBoost bundle on the older simulated tasks, then replays the
    newest tasks' job records: a job that gets less memory than it used fails and
    is retried one class up. Prints failed jobs, lost core-hours, wasted GB-hours
    and the time until the bulk of a task can start, per strategy.

    \b
    Example:
      panda-predictor replay-simulated --tasks 20000 --seed 1
      panda-predictor replay-simulated --delay-price 0.25
    """
    from panda_predictor.cli.errors import user_errors
    from pipelines.evaluation.replay_simulated import format_outcomes, replay_simulated

    with user_errors():
        outcomes = replay_simulated(tasks, seed, delay_price)
    click.echo(format_outcomes(outcomes))
