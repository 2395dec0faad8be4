"""Simulate a PanDA history: the public entry point of ``pipelines.simulation``.

THIS IS A SIMULATION, not ATLAS data; see docs/simulation.md.
"""

from pipelines.simulation import (
    DriftEvent,
    HistoryBatch,
    SimulationConfig,
    load_params,
    simulate_frames,
    simulate_history,
)

__all__ = [
    "DriftEvent",
    "HistoryBatch",
    "SimulationConfig",
    "load_params",
    "simulate_frames",
    "simulate_history",
]
