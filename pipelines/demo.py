"""The end-to-end demo on the embedded default: simulate, label, train, hook, show.

Everything lives under ``settings.home`` (default ``./var``): a SQLite PanDA
database, a local MLflow store and the model cache; nothing needs a server.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd
import sqlalchemy as sa

from model_registry.registry import CHAMPION, set_alias
from model_registry.tracking import disable_mlflow_telemetry
from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.errors import UserInputError
from panda_predictor.hook.report import HookReport
from panda_predictor.hook.submit import run_hook_once
from panda_predictor.settings import Settings
from pipelines.monitoring.drift import DriftRun, check_drift
from pipelines.monitoring.feedback import FeedbackRun, run_feedback
from pipelines.monitoring.report import render_report
from pipelines.retraining.train_and_register import RunSummary, train_and_register
from pipelines.simulation import HistoryBatch, SimulationConfig, simulate_history
from pipelines.simulation.config import weekly_history_end
from pipelines.simulation.history_writer import load_history, write_batch
from pipelines.simulation.outcomes import jobs_after_hook
from pipelines.training.config import TrainingConfig

#: Small enough to run in a few minutes on 2 cores, big enough to learn something.
DEMO_TRAINING = TrainingConfig(
    xgboost={"n_estimators": 200, "early_stopping_rounds": 15},
    keras={"epochs": 15, "batch_size": 512},
)


@dataclass
class DemoResult:
    """What the demo produced, for printing."""

    rows_written: dict[str, int]
    training: RunSummary
    hook: HookReport
    tasks: dict[int, dict[str, object]]
    jobs_run: int = 0
    feedback: FeedbackRun | None = None
    drift: DriftRun | None = None
    report: Path | None = None


def history_end() -> datetime:
    """Return where the demo's simulated history ends: within the last week, so the
    hook's recent-history window covers it, and whole weeks from a fixed date, so
    every day's demo trains the same model (:func:`weekly_history_end`)."""
    return weekly_history_end()


def reset_embedded_store(settings: Settings) -> None:
    """Delete the demo's database, MLflow store, cache and reports under ``home``."""
    if settings.db_url or settings.mlflow_tracking_uri:
        raise UserInputError(
            "The demo resets only the embedded default under 'home'. Got an explicit "
            "db_url or mlflow_tracking_uri instead: unset them or pass --keep."
        )
    for name in ("panda.sqlite", "mlflow.db"):
        (settings.home / name).unlink(missing_ok=True)
    # Reports, drift checks and decisions of the deleted versions would mislead.
    for name in ("mlartifacts", "model-cache", "reports", "monitoring", "retrain"):
        shutil.rmtree(settings.home / name, ignore_errors=True)


def run_demo(
    settings: Settings,
    n_tasks: int = 20_000,
    n_defined: int = 40,
    seed: int = 7,
    fresh: bool = True,
    progress: bool = True,
    say: Callable[[str], None] = print,
) -> DemoResult:
    """Run the main job end to end and return what each step did.

    The steps' own INFO log lines (one per task in the hook and the feedback) would
    repeat what the demo prints, so they are held back unless the level is DEBUG.
    """
    with quiet_steps():
        return _run_steps(settings, n_tasks, n_defined, seed, fresh, progress, say)


def _run_steps(
    settings: Settings,
    n_tasks: int,
    n_defined: int,
    seed: int,
    fresh: bool,
    progress: bool,
    say: Callable[[str], None],
) -> DemoResult:
    settings.home.mkdir(parents=True, exist_ok=True)
    if fresh:
        reset_embedded_store(settings)
    engine = make_engine(settings)
    say(f"[1/5] PanDA database {engine.url.render_as_string(hide_password=True)}")
    init_database(engine, settings, with_panda_tables=True)
    say(
        f"[2/5] simulating {n_tasks} finished tasks and {n_defined} newly defined "
        f"ones (seed {seed})"
    )
    config = SimulationConfig(
        n_tasks=n_tasks, n_defined=n_defined, seed=seed, end_date=history_end()
    )
    rows = load_history(engine, settings, simulate_history(config, progress=progress))
    engine.dispose()
    say("[3/5] labels from the scout formulas, training XGBoost and Keras per target")
    training = train_and_register(settings, DEMO_TRAINING, progress=progress)
    if training.gate.promoted:
        say(
            f"      the gate promoted version {training.version.version}: "
            f"{training.gate.reason}"
        )
    else:
        # The gate may rightly refuse the demo's model: it promotes the default
        # history's (docs/model-registry.md), but another --tasks or --seed may
        # fail a replay goal or show no lead over the recency rules. To still
        # show the hook, the demo moves the alias by hand, saying so: never what
        # production does.
        say(
            f"      the gate refused version {training.version.version}: "
            f"{training.gate.reason}"
        )
        say(
            "      the demo makes it champion anyway to show the hook; production "
            "keeps the champion it has (docs/model-registry.md, the gate)"
        )
        set_alias(settings, training.version.version, CHAMPION)
    say("[4/5] submit hook over the newly defined tasks")
    hook = run_hook_once(settings)
    tasks = _task_info(settings, [p.jeditaskid for p in hook.predictions])
    result = DemoResult(rows, training, hook, tasks)
    if hook.failure is None and hook.predictions:
        say("[5/5] the tasks' simulated jobs run; feedback, drift check and report")
        result.jobs_run = run_simulated_jobs(settings, config, hook)
        result.feedback = run_feedback(settings)
        result.drift = check_drift(settings)
        result.report = render_report(settings)
    return result


#: Loggers whose INFO lines the demo's own step lines and table replace.
DEMO_LOGGERS = ("panda_predictor", "pipelines", "model_registry", "mlflow")


@contextmanager
def quiet_steps() -> Iterator[None]:
    """Hold the steps' INFO log lines back for the block (:data:`DEMO_LOGGERS`).

    MLflow sets its own logger to INFO when it is first imported (and then says
    "Creating initial MLflow database tables..." on a new store), which would undo
    the quieting: it is imported first, telemetry off as everywhere.
    """
    disable_mlflow_telemetry()
    import mlflow  # noqa: F401

    with _quiet(*DEMO_LOGGERS):
        yield


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Raise the named loggers from INFO to WARNING for the block (DEBUG stays)."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        if logger.getEffectiveLevel() == logging.INFO:
            logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def run_simulated_jobs(
    settings: Settings, config: SimulationConfig, hook: HookReport
) -> int:
    """Write the job records the hook's tasks produce; return how many jobs ran.

    Applied tasks run without scouts and ask for the RAMCOUNT written; the others
    (kept scouts, and in shadow mode or outside the rollout share, shadow and
    held back) run their scouts first
    (:func:`pipelines.simulation.outcomes.jobs_after_hook`).
    """
    applied = {
        p.jeditaskid: float(p.targets["ramcount"].value)
        for p in hook.predictions
        if p.jeditaskid in set(hook.applied) and "ramcount" in p.targets
    }
    engine = make_engine(settings)
    try:
        table = get_panda_tables(settings, engine).jobsarchived4
        with engine.connect() as conn:
            last = conn.execute(sa.select(sa.func.max(table.c.pandaid))).scalar()
        with_scouts = [*hook.kept_scouts, *hook.shadow, *hook.held_back]
        jobs = jobs_after_hook(config, applied, with_scouts, int(last or 0) + 1)
        empty = pd.DataFrame()
        write_batch(engine, settings, HistoryBatch(empty, empty, jobs))
    finally:
        engine.dispose()
    return len(jobs)


def _task_info(settings: Settings, ids: list[int]) -> dict[int, dict[str, object]]:
    from panda_predictor.db.reader import read_task_features

    if not ids:
        return {}
    engine = make_engine(settings)
    try:
        frame = read_task_features(engine, settings, ids)
    finally:
        engine.dispose()
    return {
        int(r.jeditaskid): {
            "type": r.processingtype,
            "trf": r.transpath,
            "cores": r.corecount,
            "status": r.status,
        }
        for r in frame.itertuples()
    }
