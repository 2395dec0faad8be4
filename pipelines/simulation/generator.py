"""Stream a simulated PanDA history: batches of JEDI_TASKS, DATASETS, JOBSARCHIVED4.

THIS IS A SIMULATION. It stands in for ATLAS's PanDA database so the pipelines can be
built and tested anywhere; its hidden parameters are invented
(``pipelines/params/simulation.yaml``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm import tqdm

from pipelines.simulation.catalog import Catalog, build_catalog
from pipelines.simulation.config import SimulationConfig
from pipelines.simulation.datasets import dataset_frame
from pipelines.simulation.jobs import job_frame
from pipelines.simulation.requirements import fill_requirements
from pipelines.simulation.tasks import (
    TaskDraw,
    draw_tasks,
    task_frame,
    task_names,
    task_transpath,
)

#: First ids; PanDA's own are of this order of magnitude.
FIRST_TASK_ID = 40_000_000
FIRST_DATASET_ID = 900_000_000
FIRST_PANDA_ID = 6_000_000_000

_HISTORY, _NEW = 0, 1


@dataclass
class HistoryBatch:
    """Rows of the three PanDA tables for one batch of tasks (lower-case columns)."""

    jedi_tasks: pd.DataFrame
    jedi_datasets: pd.DataFrame
    jobsarchived4: pd.DataFrame

    def __len__(self) -> int:
        return len(self.jedi_tasks)

    def __iter__(self) -> Iterator[pd.DataFrame]:
        """Unpack as ``tasks, datasets, jobs``."""
        return iter((self.jedi_tasks, self.jedi_datasets, self.jobsarchived4))


def _draw_batch(
    cfg: SimulationConfig,
    cat: Catalog,
    kind: int,
    index: int,
    positions: np.ndarray,
    ids: dict[str, int],
) -> tuple[np.random.Generator, TaskDraw, dict, pd.DataFrame]:
    """Return the batch's random stream, tasks (with hidden truth), names, datasets.

    The stream is seeded by (seed, kind, batch index) alone, so
    :func:`newly_defined_draws` can draw the same tasks again later.
    """
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, kind, index]))
    new = kind == _NEW
    first_task = FIRST_TASK_ID + (cfg.n_tasks if new else 0)
    draw = draw_tasks(rng, cfg, cat, first_task, positions, new)
    names = task_names(rng, cat, draw)
    datasets = dataset_frame(rng, cat, draw, names, ids["dataset"], new)
    return rng, draw, names, datasets


def newly_defined_draws(
    config: SimulationConfig,
) -> Iterator[tuple[Catalog, TaskDraw, np.ndarray]]:
    """Yield the newly defined tasks again, per batch: catalog, draw and TRANSPATH.

    The draws carry the hidden truth (memory per core, CPU per event, ...) that
    :func:`simulate_history` used, so jobs run later for these tasks are consistent
    with what the models learnt from.
    """
    cat = build_catalog(config.params, config.drift_event)
    ids = {"dataset": FIRST_DATASET_ID, "panda": FIRST_PANDA_ID}
    for index, start in enumerate(range(0, config.n_defined, config.batch_size)):
        stop = min(config.n_defined, start + config.batch_size)
        positions = np.arange(start, stop, dtype=np.int64)
        _, draw, _, _ = _draw_batch(config, cat, _NEW, index, positions, ids)
        yield cat, draw, task_transpath(cat, draw)


def _batch(
    cfg: SimulationConfig,
    cat: Catalog,
    kind: int,
    index: int,
    positions: np.ndarray,
    ids: dict[str, int],
) -> HistoryBatch:
    """Simulate one batch; ``ids`` holds the next dataset and PanDA ids and advances."""
    new = kind == _NEW
    rng, draw, names, datasets = _draw_batch(cfg, cat, kind, index, positions, ids)
    ids["dataset"] += len(datasets)
    transpath = task_transpath(cat, draw)
    jobs, last_end = job_frame(rng, cfg.params, cat, draw, transpath, ids["panda"])
    ids["panda"] += len(jobs)
    created = draw.created.astype("datetime64[us]")
    modified = np.where(
        np.isnat(last_end), created + np.timedelta64(120, "s"), last_end
    ) + np.timedelta64(600, "s")
    tasks = task_frame(rng, cfg, cat, draw, names, modified)
    if not new:
        tasks = fill_requirements(tasks, jobs)
    return HistoryBatch(tasks, datasets, jobs)


def simulate_history(
    config: SimulationConfig | None = None, progress: bool = True
) -> Iterator[HistoryBatch]:
    """Yield the simulated history in batches of ``config.batch_size`` tasks.

    First the ``n_tasks`` historical tasks (oldest first), then the ``n_defined``
    newly defined ones. Memory use depends on the batch size only, so millions of
    tasks stream through a few GB.

    Parameters
    ----------
    config:
        What to simulate; default: :class:`SimulationConfig` defaults.
    progress:
        Show a tqdm progress bar (tasks) on stderr.
    """
    cfg = config or SimulationConfig()
    cat = build_catalog(cfg.params, cfg.drift_event)
    ids = {"dataset": FIRST_DATASET_ID, "panda": FIRST_PANDA_ID}
    total = cfg.n_tasks + cfg.n_defined
    with tqdm(total=total, unit="task", disable=not progress, desc="simulate") as bar:
        for kind, count in ((_HISTORY, cfg.n_tasks), (_NEW, cfg.n_defined)):
            for index, start in enumerate(range(0, count, cfg.batch_size)):
                stop = min(count, start + cfg.batch_size)
                positions = np.arange(start, stop, dtype=np.int64)
                batch = _batch(cfg, cat, kind, index, positions, ids)
                bar.update(len(batch))
                yield batch


def simulate_frames(
    config: SimulationConfig | None = None,
) -> HistoryBatch:
    """Return a small simulated history as one batch of concatenated frames."""
    batches = list(simulate_history(config, progress=False))
    return HistoryBatch(
        *(
            pd.concat([getattr(b, name) for b in batches], ignore_index=True)
            for name in ("jedi_tasks", "jedi_datasets", "jobsarchived4")
        )
    )
