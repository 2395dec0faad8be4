"""The processes of benchmarks/bench_hook_locks.py: database, hooks, JEDI-like writer.

Kept apart from the script so the spawned processes import only this module's
functions. Every figure is measured where it happens: the hooks count the lock
errors their driver raised (SQLSTATE 40P01 deadlock, 55P03 lock not available)
with a SQLAlchemy ``handle_error`` listener, whether or not the hook then recovered;
the JEDI-like writer times each statement that may wait (a read of the hooks'
frontier between its transactions is not timed: it waits for no lock).
"""

from __future__ import annotations

import bisect
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

DEADLOCK = "40P01"
LOCK_NOT_AVAILABLE = "55P03"
ELIGIBLE = (
    "status IN ('defined', 'ready') AND splitrule LIKE '%US=2%' AND lockedby IS NULL "
    "AND NOT EXISTS (SELECT 1 FROM doma_panda.pp_prediction_audit a "
    "WHERE a.jeditaskid = t.jeditaskid)"
)


@dataclass(frozen=True)
class HookResult:
    """What one hook pass did and met."""

    label: str
    seconds: float
    applied: int
    kept_scouts: int
    moved_by_jedi: int
    locked_by_jedi: int
    errors: int
    failure: str | None
    deadlocks: int
    lock_errors: int
    #: Seconds each write transaction held its row locks (FOR UPDATE to commit).
    writes: tuple[float, ...]


@dataclass(frozen=True)
class JediResult:
    """What the JEDI-like writer did and met."""

    committed: int
    nowait_refused: int
    deadlocks: int
    other_lock_errors: int
    longest_wait: float
    waits_over_1s: int
    waits_over_100ms: int


def _settings(db_url: str, home: str, batch: int) -> Any:
    from panda_predictor.settings import load_settings

    return load_settings(
        home=Path(home),
        db_url=db_url,
        db_schema="doma_panda",
        mlflow_tracking_uri=f"sqlite:///{Path(home) / 'mlflow.db'}",
        hook_batch_size=batch,
    )


def prepare_database(
    home: Path, history: int, defined: int, seed: int
) -> tuple[str, Any, Path, list[int]]:
    """Build PanDA's DDL, ``simulate`` into it, train and save a small bundle.

    Returns the database name, its settings, the bundle's folder and the ids of the
    defined tasks waiting for scouts.
    """
    from panda_predictor.bins_file import load_bins
    from panda_predictor.cli.simulate import simulate
    from panda_predictor.db.engine import make_engine
    from panda_predictor.serving.bundle import save_bundle
    from pipelines.training.config import TrainingConfig
    from pipelines.training.dataset import read_labelled_history
    from pipelines.training.train import train
    from tests.message_parts import build_panda_database

    name, settings = build_panda_database(home)
    simulate.main(
        [
            "--tasks",
            str(history),
            "--defined",
            str(defined),
            "--seed",
            str(seed),
            "--no-progress",
        ],
        obj=settings,
        standalone_mode=False,
    )
    engine = make_engine(settings)
    try:
        # PanDA's tables have statistics (autovacuum); a bulk load has none yet.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(sa.text("/* bench_hook_locks.prepare */ ANALYZE"))
        labelled = read_labelled_history(engine, settings, progress=False)
        result = train(
            labelled,
            load_bins(),
            TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30}),
        )
        bundle_dir = save_bundle(result.bundle, home / "bundle")
        with engine.connect() as conn:
            ids = [
                int(i)
                for i in conn.execute(
                    sa.text(
                        "/* bench_hook_locks.prepare */ SELECT jeditaskid FROM "
                        f"doma_panda.jedi_tasks t WHERE {ELIGIBLE} ORDER BY jeditaskid"
                    )
                ).scalars()
            ]
    finally:
        engine.dispose()
    return name, settings, bundle_dir, ids


def database_counts(settings: Any, name: str) -> dict[str, int]:
    """Return the server's deadlock count for the database and the eligible tasks."""
    engine = sa.create_engine(settings.db_url)
    try:
        with engine.connect() as conn:
            time.sleep(1.0)  # backends report their statistics at most once a second
            deadlocks = conn.execute(
                sa.text(
                    "/* bench_hook_locks.counts */ SELECT deadlocks FROM "
                    "pg_stat_database WHERE datname = :n"
                ),
                {"n": name},
            ).scalar_one()
            eligible = conn.execute(
                sa.text(
                    "/* bench_hook_locks.counts */ SELECT count(*) FROM "
                    f"doma_panda.jedi_tasks t WHERE {ELIGIBLE}"
                )
            ).scalar_one()
    finally:
        engine.dispose()
    return {"deadlocks": int(deadlocks), "eligible": int(eligible)}


def _watch(engine: sa.Engine) -> tuple[dict[str, int], list[float]]:
    """Count the driver's lock errors and time each write transaction's row locks."""
    errors = {"deadlocks": 0, "lock_errors": 0}
    held: list[float] = []

    @sa.event.listens_for(engine, "handle_error")
    def lock_error(context: Any) -> None:
        state = getattr(context.original_exception, "sqlstate", None)
        if state == DEADLOCK:
            errors["deadlocks"] += 1
        if state in (DEADLOCK, LOCK_NOT_AVAILABLE):
            errors["lock_errors"] += 1

    @sa.event.listens_for(engine, "before_cursor_execute")
    def lock_taken(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "FOR UPDATE" in statement and "lock_started" not in conn.info:
            conn.info["lock_started"] = time.perf_counter()

    def lock_released(conn: Any) -> None:
        started = conn.info.pop("lock_started", None)
        if started is not None:
            held.append(time.perf_counter() - started)

    sa.event.listen(engine, "commit", lock_released)
    sa.event.listen(engine, "rollback", lock_released)
    return errors, held


def hook_pass(config, bundle_dir, ready, go, results, label) -> None:
    """Load the model and the history, wait for the start, run one hook pass."""
    from panda_predictor.db.engine import make_engine
    from panda_predictor.hook.submit import SubmitHook
    from panda_predictor.serving.bundle import load_bundle
    from panda_predictor.serving.predictor import Predictor
    from panda_predictor.serving.recent import read_history_frame

    settings = _settings(*config)
    engine = make_engine(settings)
    predictor = Predictor(load_bundle(bundle_dir), "bench", "1")
    history = read_history_frame(engine, settings)
    errors, held = _watch(engine)
    hook = SubmitHook(
        settings,
        engine=engine,
        predictor_factory=lambda: predictor,
        history_factory=lambda: history,
    )
    ready.wait()
    go.wait()
    started = time.perf_counter()
    report = hook.run_once()
    seconds = time.perf_counter() - started
    engine.dispose()
    results.put(
        HookResult(
            label,
            seconds,
            len(report.applied),
            len(report.kept_scouts),
            len(report.moved_by_jedi),
            len(report.locked_by_jedi),
            len(report.errors),
            report.failure,
            errors["deadlocks"],
            errors["lock_errors"],
            tuple(held),
        )
    )


def jedi_like_writer(db_url, ids, hold, window, seed, ready, go, stop, results) -> None:
    """Lock, work on and update tasks as JEDI does until ``stop``; see the module.

    ``hold`` is (longest ordinary hold in s, long hold in s, every how many
    transactions a long hold comes). JEDI works through the oldest defined tasks
    first, as the hooks do: each transaction picks its task among the ``window``
    tasks after the highest one a hook has audited, where the hooks' batches are.
    """
    import psycopg
    from psycopg import errors

    longest_hold, long_hold, long_every = hold
    rng = random.Random(seed)
    url = sa.engine.make_url(db_url).set(drivername="postgresql")
    conn = psycopg.connect(url.render_as_string(hide_password=False))
    waits: list[float] = []
    counts = {"committed": 0, "refused": 0, "deadlocks": 0, "other": 0}

    def timed(sql: str, task_id: int) -> None:
        started = time.perf_counter()
        conn.execute(sql, (task_id,))
        waits.append(time.perf_counter() - started)

    ready.wait()
    go.wait()
    n = 0
    while not stop.is_set():
        n += 1
        frontier = conn.execute(
            "/* jedi_like.frontier */ SELECT coalesce(max(jeditaskid), 0) "
            "FROM doma_panda.pp_prediction_audit"
        ).fetchone()[0]
        conn.commit()
        start = bisect.bisect_right(ids, frontier)
        at = min(start + rng.randrange(window), len(ids) - 1)
        task_id = ids[at]
        neighbour = ids[min(at + rng.randint(1, 50), len(ids) - 1)]
        stage = "lock"
        try:
            timed(
                "/* jedi_like.lock_task */ SELECT jeditaskid, status, splitrule "
                "FROM doma_panda.jedi_tasks WHERE jeditaskid = %s FOR UPDATE NOWAIT",
                task_id,
            )
            stage = "update"
            time.sleep(
                long_hold if n % long_every == 0 else rng.random() * longest_hold
            )
            for target in (neighbour, task_id):
                timed(
                    "/* jedi_like.update_task */ UPDATE doma_panda.jedi_tasks SET "
                    "modificationtime = now() WHERE jeditaskid = %s",
                    target,
                )
            started = time.perf_counter()
            conn.commit()
            waits.append(time.perf_counter() - started)
            counts["committed"] += 1
        except errors.DeadlockDetected:
            counts["deadlocks"] += 1
            conn.rollback()
        except errors.LockNotAvailable:
            # NOWAIT on a row a hook holds: JEDI skips the task and comes back.
            counts["refused" if stage == "lock" else "other"] += 1
            conn.rollback()
    conn.close()
    results.put(
        JediResult(
            counts["committed"],
            counts["refused"],
            counts["deadlocks"],
            counts["other"],
            max(waits, default=0.0),
            sum(w > 1.0 for w in waits),
            sum(w > 0.1 for w in waits),
        )
    )
