"""The database hook's writer on PanDA's own PostgreSQL schema (doma_panda).

``panda-predictor simulate`` fills the real DDL (every NOT NULL column), and a
write-back over its defined and ready tasks leaves no task scout-capped, with the
resource type PanDA's rule gives and cputime in a unit PanDA's re-measurement
keeps right.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from message_parts import RESOURCE_TYPES, insert_tasks, prediction, task

from panda_predictor.cli.simulate import simulate
from panda_predictor.core.domain.resource_type import ResourceType, resource_type_of
from panda_predictor.db.early_remeasure import run_early_remeasure
from panda_predictor.db.task_effects import SCOUT_CAP_LIFTED
from panda_predictor.db.writer import write_predictions
from pipelines.simulation import SimulationConfig, simulate_frames

pytestmark = pytest.mark.postgres

TYPES = [ResourceType(*row) for row in RESOURCE_TYPES]


def _insert_datasets(engine: sa.Engine, task_id: int, rows: list[dict]) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    with engine.begin() as conn:
        for number, row in enumerate(rows):
            conn.execute(
                sa.text(
                    "INSERT INTO doma_panda.jedi_datasets (jeditaskid, datasetid, "
                    "datasetname, type, creationtime, modificationtime, masterid, "
                    "nfiles, nfilestobeused) VALUES (:t, :d, :n, :type, :now, :now, "
                    ":master, :nfiles, :to_use)"
                ),
                {
                    "t": task_id,
                    "d": task_id * 10 + number,
                    "n": f"ds.{task_id}.{number}",
                    "now": now,
                    "master": None,
                    **row,
                },
            )


def _datasets(engine: sa.Engine, task_id: int) -> dict[int, tuple[int, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT datasetid, nfiles, nfilestobeused "
                "FROM doma_panda.jedi_datasets WHERE jeditaskid = :t"
            ),
            {"t": task_id},
        )
        return {int(r.datasetid): (r.nfiles, r.nfilestobeused) for r in rows}


def test_a_ready_task_is_written_with_its_scout_cap_lifted(panda_ddl):
    engine, settings = panda_ddl
    insert_tasks(engine, [1], status="ready", corecount=1, resource_type="SCORE")
    _insert_datasets(
        engine,
        1,
        [
            {"type": "input", "nfiles": 50, "to_use": 10},  # capped master
            {"type": "input", "nfiles": 40, "to_use": 3, "master": 10},  # secondary
            {"type": "output", "nfiles": 0, "to_use": 0},
        ],
    )

    result = write_predictions(engine, settings, [prediction(1, ram=2600.0)])

    assert result.applied == [1]
    assert _datasets(engine, 1) == {10: (50, 50), 11: (40, 3), 12: (0, 0)}
    row = task(engine, 1)
    assert row["splitrule"] == "NG=1,TW=1"
    # 1 core, 2600 MBPerCore: above SCORE's 2000 MB after PanDA's 0.9.
    assert row["resource_type"] == "SCORE_HIMEM"
    assert (row["cputime"], row["cputimeunit"]) == (5, "HS06sPerEvent")
    with engine.connect() as conn:
        reason = conn.execute(
            sa.text("SELECT reason FROM doma_panda.pp_prediction_audit")
        ).scalar_one()
    assert SCOUT_CAP_LIFTED in reason and "resource_type=SCORE_HIMEM" in reason


def test_the_cap_counts_the_usable_files_of_jedi_dataset_contents(panda_ddl):
    engine, settings = panda_ddl
    insert_tasks(engine, [1], status="ready")
    _insert_datasets(engine, 1, [{"type": "input", "nfiles": 4, "to_use": 1}])
    now = datetime.now(UTC).replace(tzinfo=None)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO doma_panda.jedi_dataset_contents (jeditaskid, datasetid, "
                "fileid, creationdate, lfn, type, status) VALUES (1, 10, :f, :now, "
                ":lfn, 'input', :status)"
            ),
            [
                {"f": f, "now": now, "lfn": f"file.{f}", "status": status}
                for f, status in enumerate(["ready", "ready", "ready", "lost"])
            ],
        )

    write_predictions(engine, settings, [prediction(1)])

    assert _datasets(engine, 1) == {10: (4, 3)}


@pytest.mark.parametrize(
    ("corecount", "ram", "expected"),
    [
        pytest.param(1, 1500.0, "SCORE", id="score"),
        pytest.param(8, 1500.0, "MCORE", id="mcore"),
        pytest.param(8, 4000.0, "MCORE_HIMEM", id="mcore-himem"),
    ],
)
def test_the_resource_type_follows_the_new_ramcount(
    panda_ddl, corecount, ram, expected
):
    engine, settings = panda_ddl
    insert_tasks(engine, [1], corecount=corecount, resource_type="SCORE_HIMEM")

    write_predictions(engine, settings, [prediction(1, ram=ram)])

    row = task(engine, 1)
    assert (
        row["resource_type"]
        == expected
        == resource_type_of(
            TYPES,
            row["corecount"],
            row["ramcount"],
            row["baseramcount"],
            row["ramunit"],
        )
    )


def test_the_simulator_fills_every_not_null_column_of_the_real_ddl(panda_ddl, seed):
    engine, _ = panda_ddl
    frames = simulate_frames(SimulationConfig(n_tasks=20, n_defined=5, seed=seed))
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        for name in ("jedi_tasks", "jedi_datasets", "jobsarchived4"):
            required = {
                c["name"]
                for c in inspector.get_columns(name, schema="doma_panda")
                if not c["nullable"] and c["default"] is None
            }
            frame = getattr(frames, name)
            assert required <= set(frame.columns), (name, required - set(frame))
            assert not frame[sorted(required)].isna().any().any(), name


def test_simulate_fills_the_real_schema_and_no_written_task_stays_capped(panda_ddl):
    engine, settings = panda_ddl
    result = CliRunner().invoke(
        simulate,
        ["--tasks", "60", "--defined", "30", "--seed", "5", "--no-progress"],
        obj=settings,
    )
    assert result.exit_code == 0, result.output
    with engine.connect() as conn:
        eligible = [
            int(i)
            for i in conn.execute(
                sa.text(
                    "SELECT jeditaskid FROM doma_panda.jedi_tasks WHERE status IN "
                    "('defined', 'ready') AND splitrule LIKE '%US=%'"
                )
            ).scalars()
        ]
        capped_before = conn.execute(
            sa.text(
                "SELECT count(*) FROM doma_panda.jedi_datasets d JOIN "
                "doma_panda.jedi_tasks t USING (jeditaskid) WHERE t.status = 'ready' "
                "AND d.masterid IS NULL AND d.nfilestobeused < d.nfiles"
            )
        ).scalar_one()
    assert len(eligible) == 30 and capped_before > 0  # the simulator caps as JEDI

    written = write_predictions(
        engine, settings, [prediction(i, ram=1800.0, cpu=0.4) for i in eligible]
    )

    assert sorted(written.applied) == sorted(eligible)
    with engine.connect() as conn:
        capped = conn.execute(
            sa.text(
                "SELECT count(*) FROM doma_panda.jedi_datasets "
                "WHERE jeditaskid = ANY(:i) AND type IN ('input', 'pseudo_input') "
                "AND masterid IS NULL AND nfilestobeused < nfiles"
            ),
            {"i": eligible},
        ).scalar_one()
        units = set(
            conn.execute(
                sa.text(
                    "SELECT DISTINCT cputimeunit FROM doma_panda.jedi_tasks "
                    "WHERE jeditaskid = ANY(:i)"
                ),
                {"i": eligible},
            ).scalars()
        )
    assert capped == 0
    assert units == {"HS06sPerEvent"}
    for task_id in eligible:
        row = task(engine, task_id)
        assert row["resource_type"] == resource_type_of(
            TYPES,
            row["corecount"],
            row["ramcount"],
            row["baseramcount"],
            row["ramunit"],
        )


def test_on_panda_s_own_ddl_the_early_remeasurement_asks_as_panda_does(panda_ddl):
    """A written task, running with 3 finished jobs in PanDA's real JOBSARCHIVED4,
    gets PanDA's own re-measurement marker (requestTaskParameterRecalculation's):
    WALLTIMEUNIT NULL, MODIFICATIONTIME now; so does one whose third job failed at
    its maxAttempt (settled, as a lost scout); one with 2 finished jobs and a
    failure JEDI still retries does not."""
    engine, settings = panda_ddl
    insert_tasks(engine, [1, 2, 3])
    marked = [replace(prediction(i), early_remeasure=True) for i in (1, 2, 3)]
    assert write_predictions(engine, settings, marked).applied == [1, 2, 3]
    before = datetime.now(UTC).replace(tzinfo=None)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE doma_panda.jedi_tasks SET status = 'running', "
                "modificationtime = :old"
            ),
            {"old": datetime(2025, 1, 1)},
        )
        conn.execute(
            sa.text(
                "INSERT INTO doma_panda.jobsarchived4 (pandaid, jeditaskid, "
                "jobstatus, modificationtime) VALUES (:p, :t, 'finished', :now)"
            ),
            [
                {"p": 10 * task_id + job, "t": task_id, "now": before}
                for task_id, jobs in ((1, 3), (2, 2), (3, 2))
                for job in range(jobs)
            ],
        )
        # PanDA's own ATTEMPTNR and MAXATTEMPT (NOT NULL in its DDL).
        conn.execute(
            sa.text(
                "INSERT INTO doma_panda.jobsarchived4 (pandaid, jeditaskid, "
                "jobstatus, attemptnr, maxattempt, modificationtime) "
                "VALUES (:p, :t, 'failed', :attempt, 3, :now)"
            ),
            [
                {"p": 29, "t": 2, "attempt": 1, "now": before},
                {"p": 39, "t": 3, "attempt": 3, "now": before},
            ],
        )

    result = run_early_remeasure(engine, settings)

    assert result.asked == [1, 3]
    asked, waiting = task(engine, 1), task(engine, 2)
    assert asked["walltimeunit"] is None and asked["modificationtime"] >= before
    assert waiting["walltimeunit"] == "kSI2kseconds"
    assert waiting["modificationtime"] == datetime(2025, 1, 1)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT jeditaskid, finished_jobs FROM doma_panda.pp_early_remeasure "
                "WHERE asked_at IS NOT NULL ORDER BY jeditaskid"
            )
        ).all()
    assert [tuple(r) for r in rows] == [(1, 3), (3, 2)]
