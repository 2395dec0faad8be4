"""Replay the memory of simulated PanDA jobs under scouts, our predictor and an oracle.

The trace replay (:mod:`pipelines.evaluation.trace.replay`) has no PanDA task; the
simulated history has real JEDI tasks, their scout flags and their job records. This
pipeline simulates a history, trains a small XGBoost bundle on its older part, and
replays the finished job records (JOBSARCHIVED4) of the newest tasks for ``ramcount``
(MBPerCore) with :func:`panda_predictor.core.replay.engine.replay`, under the trace
replay's rules (:class:`~panda_predictor.core.replay.engine.ReplayRules`: PanDA's memory
steps, maxAttempt, and PanDA's re-measurement after 5 and 100 finished jobs):

- *scouts*: a task's finished scout jobs (SPECIALHANDLING ``sj``, ordered first) ask
  for PanDA's default (2000 MBPerCore); the other jobs wait for the slowest scout and
  ask for PanDA's measurement of the scouts
  (:func:`~panda_predictor.core.replay.engine.panda_measurement`), then PanDA
  re-measures;
- *predictor*: a task whose decision is ``applied`` asks for the predicted ramcount
  at once (no wait) and is re-measured by PanDA; a ``kept_scouts`` task runs exactly
  as under *scouts*;
- *request + PanDA re-measurement*: every task starts at once with the default and
  is re-measured (the bar a prediction must beat);
- *oracle*: every job asks for the value of its task's true label class.

A job's memory use per core, in MB, is ``(MAXPSS / 1024 - BASERAMCOUNT) / CORECOUNT``
(at least 1): PanDA requests ``ramCount * coreCount + baseRamCount`` MB, so a job
fails exactly when that use exceeds its ramcount. Run time is ENDTIME - STARTTIME and
cores CORECOUNT. Simulated data: NOT real ATLAS figures.

Run: ``python -m pipelines.evaluation.replay_simulated --tasks 20000 --seed 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from panda_predictor.bins_file import load_bins
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.cost_choice import DEFAULT_RAM_MB_PER_CORE
from panda_predictor.core.replay.engine import (
    ReplayCase,
    ReplayOutcome,
    replay,
)
from panda_predictor.core.replay.tasks import scout_delay
from panda_predictor.errors import UserInputError
from panda_predictor.serving.bundle import Bundle
from panda_predictor.serving.predictor import Predictor
from pipelines.evaluation.trace.replay import REMEASURED, format_goals
from pipelines.simulation import SimulationConfig, simulate_frames
from pipelines.training.config import TrainingConfig
from pipelines.training.dataset import LabelledHistory, frames_to_history
from pipelines.training.train import train

#: PanDA's default memory request of a scout job, in MBPerCore (the queue's).
DEFAULT_SCOUT_RAM_MB = DEFAULT_RAM_MB_PER_CORE
#: Trees of the small XGBoost model trained for the replay.
N_ESTIMATORS = 60
TARGET = "ramcount"


@dataclass(frozen=True)
class ReplayInputs:
    """What a replay needs: the trained bundle, the test tasks and their jobs.

    ``jobs`` holds one row per finished job of a test task, in replay order (by task,
    scouts first, then by start): ``jeditaskid``, ``scout``, ``used_mb`` (per core),
    ``run_s`` and ``cores``.
    """

    bundle: Bundle
    bins: BinSet
    test_tasks: pd.DataFrame
    history: pd.DataFrame
    jobs: pd.DataFrame


def job_table(jobs: pd.DataFrame, tasks: pd.DataFrame) -> pd.DataFrame:
    """Return the finished jobs of ``tasks`` with their memory use per core and run.

    :param jobs: JOBSARCHIVED4 rows (lower-case columns).
    :param tasks: JEDI_TASKS rows of the tasks to keep (``jeditaskid``,
        ``baseramcount``, ``corecount``).
    """
    base = tasks.set_index("jeditaskid")["baseramcount"]
    task_cores = tasks.set_index("jeditaskid")["corecount"]
    done = jobs[
        jobs["jeditaskid"].isin(tasks["jeditaskid"]) & (jobs["jobstatus"] == "finished")
    ]
    ids = done["jeditaskid"]
    cores = pd.to_numeric(done["corecount"]).to_numpy(dtype=float)
    fallback = pd.to_numeric(ids.map(task_cores)).to_numpy(dtype=float)
    cores = np.where(cores > 0, cores, np.where(fallback > 0, fallback, 1.0))
    base_mb = np.nan_to_num(pd.to_numeric(ids.map(base)).to_numpy(dtype=float))
    used = (
        pd.to_numeric(done["maxpss"]).to_numpy(dtype=float) / 1024 - base_mb
    ) / cores
    run_s = (done["endtime"] - done["starttime"]).dt.total_seconds().to_numpy(float)
    handling = "," + done["specialhandling"].fillna("").astype(str) + ","
    out = pd.DataFrame(
        {
            "jeditaskid": ids.to_numpy(),
            "scout": handling.str.contains(",sj,", regex=False).to_numpy(),
            "used_mb": np.maximum(np.nan_to_num(used), 1.0),
            "run_s": np.maximum(np.nan_to_num(run_s), 0.0),
            "cores": cores,
            "starttime": done["starttime"].to_numpy(),
        }
    )
    out = out.sort_values(
        ["jeditaskid", "scout", "starttime"], ascending=[True, False, True]
    )
    return out.drop(columns="starttime").reset_index(drop=True)


def prepare(n_tasks: int, seed: int) -> ReplayInputs:
    """Simulate ``n_tasks`` tasks, train on the older ones, keep the newest's jobs."""
    if not isinstance(n_tasks, int) or n_tasks < 100:
        raise UserInputError(
            f"The 'n_tasks' field must be an integer >= 100. Got {n_tasks!r} instead."
        )
    batch = simulate_frames(SimulationConfig(n_tasks=n_tasks, seed=seed))
    frame = frames_to_history(
        batch.jedi_tasks, batch.jedi_datasets, batch.jobsarchived4
    )
    history = LabelledHistory(
        frame.sort_values(["creationdate", "jeditaskid"]).reset_index(drop=True)
    )
    bins = load_bins()
    config = TrainingConfig(
        model_kinds=("xgboost",), xgboost={"n_estimators": N_ESTIMATORS}, seed=seed
    )
    result = train(history, bins, config)
    test = result.test_tasks
    tasks = batch.jedi_tasks[batch.jedi_tasks["jeditaskid"].isin(test["jeditaskid"])]
    return ReplayInputs(
        bundle=result.bundle,
        bins=bins,
        test_tasks=test,
        history=history.history,
        jobs=job_table(batch.jobsarchived4, tasks),
    )


def scout_counts(jobs: pd.DataFrame) -> np.ndarray:
    """Return, per row of ``jobs``, its task's finished scouts (at least 1)."""
    counts = jobs.groupby("jeditaskid")["scout"].transform("sum").to_numpy(int)
    return np.maximum(counts, 1)


def replay_inputs(
    inputs: ReplayInputs, default: float = DEFAULT_SCOUT_RAM_MB
) -> list[ReplayOutcome]:
    """Return the scouts, predictor, request and oracle outcomes of ``inputs``' jobs.

    Each task keeps its own number of finished scouts (:func:`scout_counts`).
    """
    jobs, bins = inputs.jobs, inputs.bins[TARGET]
    task = jobs["jeditaskid"].to_numpy()
    common = dict(
        resource="memory",
        task=task,
        used=jobs["used_mb"].to_numpy(),
        run_s=jobs["run_s"].to_numpy(),
        cores=jobs["cores"].to_numpy(),
        ladder=np.asarray(bins.values, dtype=float),
    )
    n_scouts = scout_counts(jobs)
    delay = scout_delay(task, jobs["run_s"].to_numpy(), n_scouts)
    first = np.full(len(jobs), float(default))
    predictor = Predictor(inputs.bundle, "replay", "1")
    table = predictor.predict_table(inputs.test_tasks, inputs.history)
    table = table[table["decision"] == "applied"]
    applied = pd.Series(
        table[f"{TARGET}_value"].to_numpy(dtype=float),
        index=table["jeditaskid"].to_numpy(),
        dtype=float,
    )
    predicted = applied.reindex(task).to_numpy()
    keep = np.isnan(predicted)
    labels = inputs.test_tasks.set_index("jeditaskid")[TARGET]
    classes = bins.assign(labels.to_numpy())
    truth = pd.Series([bins.value_of(int(c)) for c in classes], index=labels.index)
    return [
        replay(
            "scouts",
            ReplayCase(
                requested=first,
                bulk_delay_s=delay,
                scouts=n_scouts,
                remeasure=True,
                **common,
            ),
        ),
        replay(
            "predictor",
            ReplayCase(
                requested=np.where(keep, first, predicted),
                bulk_delay_s=np.where(keep, delay, 0.0),
                scouts=np.where(keep, n_scouts, 0),
                # Written MBPerCoreFixed where training chose so: not re-measured.
                remeasure=keep | (TARGET not in predictor.fixed_targets),
                **common,
            ),
        ),
        replay(REMEASURED, ReplayCase(requested=first, remeasure=True, **common)),
        replay(
            "oracle", ReplayCase(requested=truth.reindex(task).to_numpy(), **common)
        ),
    ]


def replay_simulated(
    n_tasks: int, seed: int, delay_price: float | None = None
) -> list[ReplayOutcome]:
    """Return the scouts, predictor and oracle ramcount outcomes of a simulation.

    ``delay_price`` replaces the price training chose (as the ``delay_price``
    setting does at run time), to see what the choice costs.
    """
    inputs = prepare(n_tasks, seed)
    if delay_price is not None:
        inputs = with_delay_price(inputs, delay_price)
    return replay_inputs(inputs)


def with_delay_price(inputs: ReplayInputs, delay_price: float) -> ReplayInputs:
    """Return ``inputs`` whose bundle serves ``delay_price`` instead of its own."""
    cost = inputs.bundle.cost.with_price(delay_price)
    return replace(inputs, bundle=replace(inputs.bundle, cost=cost))


def format_outcomes(outcomes: list[ReplayOutcome]) -> str:
    """Return a Markdown table of replay outcomes (one row per strategy), then the
    predictor's goals against scouts
    (:func:`pipelines.evaluation.trace.replay.format_goals`).
    """
    lines = [
        "| strategy | jobs / tasks | failed jobs | lost jobs | lost core-h | "
        "wasted GB-h | bulk delay (h/task) | retry delay (h/job) |",
        "|---" * 8 + "|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.strategy} | {o.n_jobs:,} / {o.n_tasks:,} | "
            f"{o.failed_job_rate:.3f} | {o.lost_job_rate:.3f} | "
            f"{o.lost_core_hours:.4g} | {o.wasted_gb_hours:.4g} | "
            f"{o.mean_bulk_delay_hours:.3f} | {o.mean_retry_delay_hours:.3f} |"
        )
    names = {o.strategy for o in outcomes}
    if {"scouts", "predictor"} <= names:
        lines += ["", format_goals(TARGET, outcomes, "predictor")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print the replay table of a simulated history (``--tasks``, ``--seed``)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks",
        type=int,
        default=20000,
        help="simulated tasks; the older ones train the bundle, the newest are "
        "replayed (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=1,
        help="seed of the simulation and the training (default: %(default)s)",
    )
    parser.add_argument(
        "--delay-price",
        type=float,
        default=None,
        help="core-hours one core-hour of a job's delay is worth, for every target "
        "(default: the prices training chose)",
    )
    args = parser.parse_args(argv)
    print(format_outcomes(replay_simulated(args.tasks, args.seed, args.delay_price)))


if __name__ == "__main__":
    main()
