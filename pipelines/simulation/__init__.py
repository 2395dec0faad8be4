"""A simulated PanDA history (JEDI_TASKS, JEDI_DATASETS, JOBSARCHIVED4): NOT real data.

Belongs here: drawing the history and writing it into PanDA's tables
(:mod:`pipelines.simulation.history_writer`). Not here: labels, training or anything
that reads the history back. See docs/simulation.md. Entry points:
:func:`simulate_history` (stream of batches) and :func:`simulate_frames` (one small
history in memory).
"""

from pipelines.simulation.config import (
    DEFAULT_PARAMS_FILE,
    DriftEvent,
    SimulationConfig,
    load_params,
)
from pipelines.simulation.generator import (
    HistoryBatch,
    simulate_frames,
    simulate_history,
)

__all__ = [
    "DEFAULT_PARAMS_FILE",
    "DriftEvent",
    "HistoryBatch",
    "SimulationConfig",
    "load_params",
    "simulate_frames",
    "simulate_history",
]
