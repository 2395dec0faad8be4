"""``panda-predictor simulate``: fill the database with a SIMULATED history."""

from __future__ import annotations

import logging
from datetime import datetime

import click

from panda_predictor.settings import Settings

log = logging.getLogger(__name__)


@click.command("simulate")
@click.option(
    "--tasks",
    "n_tasks",
    type=int,
    default=10_000,
    show_default=True,
    help="Historical (finished) tasks to simulate, with their scout and regular jobs.",
)
@click.option(
    "--defined",
    "n_defined",
    type=int,
    default=0,
    show_default=True,
    help="Newly defined tasks ('defined'/'ready', US=2, no jobs) created after the "
    "history: what the submit hooks predict.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Random seed (>= 0)."
)
@click.option(
    "--months", type=int, default=24, show_default=True, help="Length of the history."
)
@click.option(
    "--end-date",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    default=None,
    help="End of the history; newly defined tasks are created the day after. A seed "
    "draws the same history for every end, only moved in time "
    "[default: the newest day within the last week that is whole weeks from "
    "2026-01-01, so the hook's recent-history window covers the history and every "
    "day's default gives the same tasks on the same weekdays].",
)
@click.option(
    "--batch-size",
    type=int,
    default=10_000,
    show_default=True,
    help="Tasks per batch and per transaction (memory grows with it).",
)
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
@click.pass_obj
def simulate(
    settings: Settings,
    n_tasks: int,
    n_defined: int,
    seed: int,
    months: int,
    end_date: datetime | None,
    batch_size: int,
    no_progress: bool,
) -> None:
    """Write a SIMULATED PanDA history into the configured database.

    Fills JEDI_TASKS, JEDI_DATASETS and JOBSARCHIVED4 with invented but PanDA-like
    tasks, datasets and job records (scouts flagged 'sj'), creating the PanDA test
    tables first if they are missing. Never point it at a production PanDA database.
    See docs/simulation.md.

    \b
    Example:
      PANDA_PREDICTOR_DB_URL=sqlite:///var/panda.sqlite \\
        panda-predictor simulate --tasks 20000 --defined 200 --seed 7
    """
    from panda_predictor.cli.errors import user_errors
    from panda_predictor.db.engine import make_engine
    from panda_predictor.errors import UserInputError
    from pipelines.simulation import SimulationConfig, simulate_history
    from pipelines.simulation.config import weekly_history_end
    from pipelines.simulation.history_writer import ensure_panda_tables, load_history

    try:
        config = SimulationConfig(
            n_tasks=n_tasks,
            n_defined=n_defined,
            seed=seed,
            months=months,
            end_date=end_date or weekly_history_end(),
            batch_size=batch_size,
        )
    except UserInputError as exc:
        raise click.BadParameter(str(exc)) from None
    with user_errors():
        engine = make_engine(settings)
        try:
            created = ensure_panda_tables(engine, settings)
            totals = load_history(
                engine, settings, simulate_history(config, progress=not no_progress)
            )
        finally:
            engine.dispose()
    if created:
        click.echo("Created the PanDA test tables.")
    click.echo(
        "Wrote a simulated history: "
        + ", ".join(f"{count} rows into {name}" for name, count in totals.items())
    )
