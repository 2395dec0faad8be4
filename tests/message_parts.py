"""Real parts for the scout_prediction route: PanDA's PostgreSQL schema, RabbitMQ.

- :func:`build_panda_database` builds PanDA's own DDL (``/work/shared/data/
  panda-schema/build.sh``) in a fresh database and adds the plugin's tables.
- :class:`StandInTaskBuffer` answers the three JEDI task-buffer calls the plugin
  makes (``getTaskWithID_JEDI``, ``updateTask_JEDI``, ``reset_resource_type_task``)
  over SQLAlchemy on that schema, with the same signatures and return values as
  JEDI's ``JediTaskBuffer``: JEDI's real task buffer needs a full JEDI (its DB
  proxy pool and configuration), so it cannot run here.
- :func:`require_broker` checks RabbitMQ's STOMP port and fails (never skips) when
  it is closed: scripts/test.sh enables the plugin.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from panda_predictor.core.domain.resource_type import ResourceType, resource_type_of
from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.db.engine import make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.plugins.task_writers import COLUMNS
from panda_predictor.settings import Settings, load_settings

SCHEMA_DIR = Path(os.environ.get("PANDA_SCHEMA_DIR", "/work/shared/data/panda-schema"))
PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
STOMP_PORT = 61613
#: ATLAS's four resource types (RESOURCE_TYPES rows).
RESOURCE_TYPES = [
    ("SCORE", 1, 1, None, 2000),
    ("SCORE_HIMEM", 1, 1, 2001, None),
    ("MCORE", 2, None, None, 2000),
    ("MCORE_HIMEM", 2, None, 2001, None),
]


def build_panda_database(tmp_home: Path) -> tuple[str, Settings]:
    """Build PanDA's schema in a new database; return its name and settings."""
    name = f"pp_msg_{uuid.uuid4().hex[:10]}"
    subprocess.run(
        ["bash", str(SCHEMA_DIR / "build.sh"), name],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    settings = load_settings(
        home=tmp_home,
        db_url=f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}",
        db_schema="doma_panda",
        mlflow_tracking_uri=f"sqlite:///{tmp_home / 'mlflow.db'}",
    )
    engine = make_engine(settings)
    init_database(engine, settings)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO doma_panda.resource_types (resource_name, mincore, "
                "maxcore, minrampercore, maxrampercore) VALUES (:n, :a, :b, :c, :d)"
            ),
            [dict(zip("nabcd", row, strict=True)) for row in RESOURCE_TYPES],
        )
    engine.dispose()
    return name, settings


def drop_database(name: str) -> None:
    """Drop a database built by :func:`build_panda_database`."""
    engine = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


def reset_tables(engine: sa.Engine) -> None:
    """Empty the tasks and the plugin's audit and message tables."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "TRUNCATE doma_panda.jedi_tasks, doma_panda.pp_message_applied, "
                "doma_panda.pp_message_published, doma_panda.pp_prediction_audit, "
                "doma_panda.pp_early_remeasure"
            )
        )


def insert_tasks(engine: sa.Engine, ids: list[int], **overrides: Any) -> None:
    """Insert ``defined`` tasks waiting for scouts (PanDA's NOT NULL columns set)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = []
    for task_id in ids:
        row = {
            "jeditaskid": task_id,
            "taskname": f"user.test.{task_id}",
            "status": "defined",
            "username": "tester",
            "creationdate": now,
            "modificationtime": now,
            "prodsourcelabel": "managed",
            "vo": "atlas",
            "corecount": 1,
            "splitrule": "NG=1,US=2,TW=1",
            "ramcount": 1000,
            "ramunit": "MBPerCore",
            "baseramcount": 0,
            "cputime": 10,
            "cputimeunit": "HS06sPerEvent",
            "walltime": 0,
            "walltimeunit": None,
            "resource_type": "SCORE",
        }
        row.update(overrides)
        rows.append(row)
    columns = list(rows[0])
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"INSERT INTO doma_panda.jedi_tasks ({', '.join(columns)}) "
                f"VALUES ({', '.join(':' + c for c in columns)})"
            ),
            rows,
        )


def task(engine: sa.Engine, task_id: int) -> dict[str, Any]:
    """Return a JEDI_TASKS row as a dict."""
    with engine.connect() as conn:
        row = (
            conn.execute(
                sa.text("SELECT * FROM doma_panda.jedi_tasks WHERE jeditaskid = :i"),
                {"i": task_id},
            )
            .mappings()
            .first()
        )
    return dict(row) if row else {}


def prediction(
    task_id: int,
    decision: str = "applied",
    ram: float = 2600.0,
    cpu: float = 4.2,
    io: float = 300.0,
    wall: float = 20.0,
    version: str = "7",
    early_remeasure: bool = False,
) -> TaskPrediction:
    """Return a TaskPrediction as the predictor makes one (four targets)."""

    def target(name: str, value: float, unit: str) -> TargetPrediction:
        return TargetPrediction(name, 1, "b", None, None, value, unit, 0.9, (0.1, 0.9))

    return TaskPrediction(
        task_id,
        "panda-predictor",
        version,
        decision,  # type: ignore[arg-type]
        "confident on every target",
        {
            "ramcount": target("ramcount", ram, "MBPerCore"),
            "cputime": target("cputime", cpu, "HS06sPerEvent"),
            "iointensity": target("iointensity", io, "kBPerS"),
            "walltime": target("walltime", wall, "kSI2kseconds"),
        },
        datetime.now(UTC).replace(tzinfo=None),
        early_remeasure=early_remeasure,
    )


def require_broker() -> None:
    """Fail the test when RabbitMQ's STOMP port does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", STOMP_PORT), timeout=2):
            return
    except OSError as exc:
        pytest.fail(
            f"RabbitMQ's STOMP port {STOMP_PORT} must be listening "
            f"(scripts/test.sh enables rabbitmq_stomp). Got {exc} instead."
        )


def broker_settings(settings: Settings, **overrides: Any) -> Settings:
    """Return ``settings`` with the local broker and a fresh queue."""
    values = settings.model_dump()
    values.update(
        broker_host="127.0.0.1",
        broker_port=STOMP_PORT,
        broker_username="guest",
        broker_passcode="guest",
        broker_destination=f"/queue/pp_test_{uuid.uuid4().hex[:10]}",
        broker_receipt_timeout_seconds=5.0,
        broker_retry_seconds=60.0,
    )
    values.update(overrides)
    return Settings.model_construct(**values)


class TaskSpec:
    """JediTaskSpec's attribute names, with its record of changed attributes."""

    def __init__(self, values: dict[str, Any]) -> None:
        object.__setattr__(self, "_changed", set())
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, name, None) != value:
            self._changed.add(name)
        object.__setattr__(self, name, value)


class StandInTaskBuffer:
    """JEDI's three task-buffer calls over SQLAlchemy on PanDA's real schema."""

    def __init__(self, engine: sa.Engine, schema: str = "doma_panda") -> None:
        self.engine = engine
        self.schema = schema
        self.calls: list[str] = []

    def getTaskWithID_JEDI(
        self,
        jediTaskID,
        fullFlag=False,
        lockTask=False,  # noqa: N802,N803
        pid=None,
        lockInterval=None,
        clearError=False,
    ):  # noqa: N803
        self.calls.append("getTaskWithID_JEDI")
        names = ", ".join(COLUMNS.values())
        with self.engine.connect() as conn:
            row = (
                conn.execute(
                    sa.text(
                        f"SELECT {names} FROM {self.schema}.jedi_tasks "
                        "WHERE jeditaskid = :i"
                    ),
                    {"i": jediTaskID},
                )
                .mappings()
                .first()
            )
        if row is None:
            return True, None
        return True, TaskSpec({a: row[c] for a, c in COLUMNS.items()})

    def updateTask_JEDI(
        self,
        taskSpec,
        criteria,
        oldStatus=None,
        updateDEFT=False,  # noqa: N802,N803
        insertUnknown=None,
        setFrozenTime=True,
        setOldModTime=False,
    ):  # noqa: N803
        self.calls.append("updateTask_JEDI")
        values = {COLUMNS[a]: getattr(taskSpec, a) for a in taskSpec._changed}
        values["modificationtime"] = datetime.now(UTC).replace(tzinfo=None)
        sets = ", ".join(f"{c} = :v_{c}" for c in values)
        where = " AND ".join(
            f"{COLUMNS[k]} IS NULL" if v is None else f"{COLUMNS[k]} = :c_{k}"
            for k, v in criteria.items()
        )
        params = {f"v_{c}": v for c, v in values.items()}
        params.update({f"c_{k}": v for k, v in criteria.items() if v is not None})
        if oldStatus:
            where += (
                " AND status IN ("
                + ", ".join(f":s{i}" for i in range(len(oldStatus)))
                + ")"
            )
            params.update({f"s{i}": s for i, s in enumerate(oldStatus)})
        with self.engine.begin() as conn:
            result = conn.execute(
                sa.text(f"UPDATE {self.schema}.jedi_tasks SET {sets} WHERE {where}"),
                params,
            )
        return True, result.rowcount

    def reset_resource_type_task(self, jedi_task_id, use_commit=True):
        self.calls.append("reset_resource_type_task")
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.text(
                    f"SELECT corecount, ramcount, baseramcount, ramunit FROM "
                    f"{self.schema}.jedi_tasks WHERE jeditaskid = :i"
                ),
                {"i": jedi_task_id},
            ).one()
            types = [
                ResourceType(*r)
                for r in conn.execute(
                    sa.text(
                        f"SELECT resource_name, mincore, maxcore, minrampercore, "
                        f"maxrampercore FROM {self.schema}.resource_types"
                    )
                )
            ]
            conn.execute(
                sa.text(
                    f"UPDATE {self.schema}.jedi_tasks SET resource_type = :r "
                    "WHERE jeditaskid = :i"
                ),
                {"r": resource_type_of(types, *row), "i": jedi_task_id},
            )
        return True


def expired_copy(body: dict[str, Any]) -> dict[str, Any]:
    """Return a message body that expired an hour ago."""
    created = datetime.now(UTC) - timedelta(hours=2)
    return {
        **body,
        "created_at": created.isoformat(),
        "expires_at": (created + timedelta(hours=1)).isoformat(),
    }
