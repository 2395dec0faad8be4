"""A database holding a small simulated PanDA history and newly defined tasks.

The hook's tests (writing, logging, shadow mode) all start from the same world:
PanDA's tables and ours, a few hundred finished tasks with their jobs, and a few
tasks at ``defined`` for the hook to decide.
"""

from __future__ import annotations

from panda_predictor.db.engine import make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.settings import Settings
from pipelines.simulation import SimulationConfig, simulate_history
from pipelines.simulation.history_writer import load_history


def load_simulated_panda(
    settings: Settings, seed: int, n_tasks: int, n_defined: int
) -> Settings:
    """Create the tables in ``settings``' database, fill them and return the settings.

    ``n_tasks`` finished tasks (with their jobs) and ``n_defined`` new ones, from
    the simulator with ``seed``.
    """
    engine = make_engine(settings)
    try:
        init_database(engine, settings, with_panda_tables=True)
        config = SimulationConfig(n_tasks=n_tasks, n_defined=n_defined, seed=seed)
        load_history(engine, settings, simulate_history(config, progress=False))
    finally:
        engine.dispose()
    return settings
