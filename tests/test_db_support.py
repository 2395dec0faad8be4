"""Shared helpers of the database tests: task rows, audit rows, predictions.

The ``engine`` and ``db`` fixtures live in ``conftest.py``; this module holds no
tests of its own.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

import sqlalchemy as sa

from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.db.engine import get_panda_tables, get_plugin_tables


def add_task(
    engine: sa.Engine,
    settings,
    task_id: int,
    *,
    status: str = "defined",
    splitrule: str | None = "TI=1,US=2",
    datasets: tuple[tuple[str, int | None, int | None], ...] = (),
    jobs: int = 0,
    **columns,
) -> None:
    """Insert a JEDI_TASKS row, its datasets ``(type, nfiles, nevents)`` and jobs."""
    tables = get_panda_tables(settings, engine)
    row = {
        "jeditaskid": task_id,
        "taskname": f"task.{task_id}",
        "status": status,
        "splitrule": splitrule,
        "prodsourcelabel": "managed",
        "processingtype": "simul",
        "transhome": "AthSimulation-23.0.1",
        "transpath": "Sim_tf.py",
        "corecount": 8,
        "creationdate": datetime(2025, 1, 1) + timedelta(days=task_id % 28),
        "ramcount": 2000,
        "ramunit": "MBPerCore",
        "cputime": None,
        "cputimeunit": None,
    }
    row.update(columns)
    with engine.begin() as conn:
        conn.execute(sa.insert(tables.jedi_tasks), row)
        for number, (kind, nfiles, nevents) in enumerate(datasets):
            conn.execute(
                sa.insert(tables.jedi_datasets),
                {
                    "jeditaskid": task_id,
                    "datasetid": task_id * 100 + number,
                    "datasetname": f"ds.{task_id}.{number}",
                    "type": kind,
                    "nfiles": nfiles,
                    "nevents": nevents,
                },
            )
        for number in range(jobs):
            conn.execute(
                sa.insert(tables.jobsarchived4),
                {
                    "pandaid": task_id * 1000 + number,
                    "jeditaskid": task_id,
                    "jobstatus": "finished",
                    "corecount": 8,
                    "maxpss": 1_000_000 + number,
                    "cpuconsumptiontime": 3600 + number,
                },
            )


def task_row(engine: sa.Engine, settings, task_id: int) -> dict:
    """Return the JEDI_TASKS row of ``task_id`` as a dict."""
    tasks = get_panda_tables(settings, engine).jedi_tasks
    with engine.connect() as conn:
        return dict(
            conn.execute(sa.select(tasks).where(tasks.c.jeditaskid == task_id))
            .mappings()
            .one()
        )


def audit_rows(engine: sa.Engine, settings) -> dict[int, dict]:
    """Return the audit rows by task id."""
    audit = get_plugin_tables(settings, engine).audit
    with engine.connect() as conn:
        return {
            row["jeditaskid"]: dict(row)
            for row in conn.execute(sa.select(audit)).mappings()
        }


def make_prediction(
    task_id: int,
    decision: str = "applied",
    reason: str = "confident",
    cputime: float = 25,
    **fields,
) -> TaskPrediction:
    """Return a prediction of all four targets for ``task_id``."""
    targets = {
        "ramcount": TargetPrediction(
            "ramcount",
            2,
            "2000-3000",
            2000.0,
            3000.0,
            3000,
            "MBPerCore",
            0.9,
            (0.05, 0.05, 0.9),
        ),
        "cputime": TargetPrediction(
            "cputime",
            1,
            "low",
            0.0,
            float(cputime),
            cputime,
            "HS06sPerEvent",
            0.8,
            (0.2, 0.8),
        ),
        "iointensity": TargetPrediction(
            "iointensity", 0, "low", 0.0, 500.0, 500, "kBPerS", 0.95, (0.95, 0.05)
        ),
        "walltime": TargetPrediction(
            "walltime", 0, "short", 0.0, 100.0, 100, "kSI2kseconds", 0.7, (0.7, 0.3)
        ),
    }
    return TaskPrediction(
        jeditaskid=task_id,
        model_name="panda-predictor",
        model_version="3",
        decision=decision,
        reason=reason,
        targets=targets,
        **fields,
    )


def database_with_one_eligible_task(home) -> None:
    """Create the SQLite database of ``home`` with one task waiting for scouts.

    The hook loads a model only when a task is eligible, so a pass over an empty
    database never reaches the registry.
    """
    from panda_predictor.db.engine import make_engine
    from panda_predictor.db.migrations import init_database
    from panda_predictor.settings import load_settings

    settings = load_settings(home=home)
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    add_task(engine, settings, 1001)
    engine.dispose()


#: A task's MODIFICATIONTIME before the early re-measurement touches it.
LONG_AGO = datetime(2025, 1, 1)
#: PANDAIDs of the jobs :func:`add_jobs` adds, unique within a test session.
PANDA_IDS = itertools.count(1_000_000)


def running_task(db, settings, task_id: int, finished: int, **columns) -> None:
    """Add a task the hook wrote with the scouts' own first values (marked for the
    early re-measurement), now running with ``finished`` finished jobs."""
    from panda_predictor.db.writer import write_predictions

    add_task(db, settings, task_id, modificationtime=LONG_AGO)
    write_predictions(db, settings, [make_prediction(task_id, early_remeasure=True)])
    set_task(db, settings, task_id, **{"status": "running", **columns})
    add_jobs(db, settings, task_id, finished)


def set_task(db, settings, task_id: int, **columns) -> None:
    """Change columns of a JEDI_TASKS row, as JEDI would."""
    tasks = get_panda_tables(settings, db).jedi_tasks
    with db.begin() as conn:
        conn.execute(
            tasks.update().where(tasks.c.jeditaskid == task_id).values(**columns)
        )


def add_jobs(
    db,
    settings,
    task_id: int,
    n: int,
    status: str = "finished",
    archive=False,
    attempt: int = 1,
) -> None:
    """Add ``n`` jobs of ``task_id`` to JOBSARCHIVED4 (or PanDA's archive), each
    its file's ``attempt`` of 3 (a failed job at 3 is lost)."""
    tables = get_panda_tables(settings, db)
    table = tables.jobsarchived if archive else tables.jobsarchived4
    with db.begin() as conn:
        for _ in range(n):
            conn.execute(
                sa.insert(table),
                {
                    "pandaid": next(PANDA_IDS),
                    "jeditaskid": task_id,
                    "jobstatus": status,
                    "attemptnr": attempt,
                    "maxattempt": 3,
                    "modificationtime": datetime(2025, 1, 2),
                },
            )
