"""Writing predictions into JEDI_TASKS with an audit row, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import sqlalchemy as sa
from test_db_support import (
    add_task,
    audit_rows,
    make_prediction,
    task_row,
)

from panda_predictor.core.domain.task_prediction import TargetPrediction
from panda_predictor.core.domain.units import database_value
from panda_predictor.db.audit_writer import panda_value
from panda_predictor.db.engine import get_panda_tables
from panda_predictor.db.task_effects import (
    CPUTIME_NOT_FIXED,
    DISK_COUNTS_LEFT,
    RESOURCE_TYPE_KEPT,
    SCOUT_CAP_LIFTED,
)
from panda_predictor.db.writer import MOVED_BY_JEDI, write_predictions


def test_applied_prediction_is_written_and_audited(db, settings):
    add_task(db, settings, 1, splitrule="TI=1,US=2,MF=3")

    result = write_predictions(db, settings, [make_prediction(1)])

    assert result.applied == [1] and result.audited == 1
    row = task_row(db, settings, 1)
    assert row["splitrule"] == "TI=1,MF=3"
    assert (row["ramcount"], row["ramunit"]) == (3000, "MBPerCore")
    assert (row["cputime"], row["cputimeunit"]) == (25, "HS06sPerEvent")
    assert (row["iointensity"], row["iointensityunit"]) == (500, "kBPerS")
    assert (row["walltime"], row["walltimeunit"]) == (100, "kSI2kseconds")
    audit = audit_rows(db, settings)[1]
    assert audit["decision"] == "applied"
    # 8 cores, 3000 MBPerCore: MCORE_HIMEM by PanDA's rule (0003 seeds the types).
    assert audit["reason"] == (
        f"confident; resource_type=MCORE_HIMEM; {DISK_COUNTS_LEFT}"
    )
    assert row["resource_type"] == "MCORE_HIMEM"
    assert audit["model_name"] == "panda-predictor" and audit["model_version"] == "3"
    assert audit["ramcount_class"] == 2 and audit["ramcount_value"] == 3000
    assert audit["ramcount_confidence"] == pytest.approx(0.9)
    assert json.loads(audit["ramcount_proba"]) == [0.05, 0.05, 0.9]
    assert audit["ramcount_proba"] == "[0.05,0.05,0.9]"
    assert audit["written_at"] is not None and audit["predicted_at"] is not None
    assert audit["host"]


def test_database_path_writes_plain_cputime_and_fixes_only_ramcount(db, settings):
    add_task(db, settings, 1, splitrule="US=2")

    write_predictions(db, settings, [make_prediction(1, cputime=3)], fixed_units=True)

    row = task_row(db, settings, 1)
    assert row["splitrule"] is None
    # Never mHS06sPerEvent nor ...Fixed on this path (PanDA reads cpuTimeUnit from
    # the task parameters): 3 HS06sPerEvent as is, rounded up.
    assert (row["cputime"], row["cputimeunit"]) == (3, "HS06sPerEvent")
    assert row["ramunit"] == "MBPerCoreFixed"
    assert row["iointensityunit"] == "kBPerS"
    audit = audit_rows(db, settings)[1]
    assert (audit["cputime_value"], audit["cputime_unit"]) == (3, "HS06sPerEvent")
    assert audit["ramcount_unit"] == "MBPerCoreFixed"
    assert CPUTIME_NOT_FIXED in audit["reason"]


@pytest.mark.parametrize(
    ("cputime", "expected"),
    [
        pytest.param(0.3, (1, "HS06sPerEvent"), id="below-one"),
        pytest.param(4.2, (5, "HS06sPerEvent"), id="below-ten"),
        pytest.param(25.0, (25, "HS06sPerEvent"), id="plain"),
    ],
)
def test_database_value_never_uses_the_milli_unit(cputime, expected):
    target = make_prediction(1, cputime=cputime).targets["cputime"]

    assert database_value(target) == expected
    assert database_value(target, fixed_units=True) == expected


def test_fixed_units_follows_the_model_unless_set(tmp_path, monkeypatch):
    from panda_predictor.settings import load_settings

    # Unset: the unit each prediction carries (training's choice) is written.
    assert load_settings(home=tmp_path).fixed_units is None
    for text, value in (("true", True), ("false", False)):
        monkeypatch.setenv("PANDA_PREDICTOR_FIXED_UNITS", text)
        assert load_settings(home=tmp_path).fixed_units is value


@pytest.mark.parametrize(
    ("value", "upper", "unit", "fixed", "expected"),
    [
        pytest.param(
            25, 30.0, "HS06sPerEvent", False, (25, "HS06sPerEvent"), id="plain"
        ),
        pytest.param(
            9, 9.5, "HS06sPerEvent", False, (9000, "mHS06sPerEvent"), id="milli"
        ),
        pytest.param(
            0, 0.25, "HS06sPerEvent", False, (250, "mHS06sPerEvent"), id="zero"
        ),
        pytest.param(
            40, 50.0, "HS06sPerEvent", True, (40, "HS06sPerEventFixed"), id="fixed"
        ),
    ],
)
def test_panda_value(value, upper, unit, fixed, expected):
    target = TargetPrediction("cputime", 0, "c", 0.0, upper, value, unit, 0.5, (1.0,))
    assert panda_value(target, fixed) == expected


def test_kept_scouts_changes_no_task(db, settings):
    add_task(db, settings, 1)
    before = task_row(db, settings, 1)

    result = write_predictions(
        db, settings, [make_prediction(1, "kept_scouts", reason="low confidence")]
    )

    assert result.kept_scouts == [1] and result.applied == []
    assert task_row(db, settings, 1) == before
    audit = audit_rows(db, settings)[1]
    assert (audit["decision"], audit["reason"]) == ("kept_scouts", "low confidence")
    assert audit["written_at"] is None and audit["cputime_value"] == 25


@pytest.mark.parametrize(
    ("status", "splitrule"),
    [
        pytest.param("scouting", "TI=1,US=2", id="status-moved"),
        pytest.param("ready", "TI=1", id="scouts-already-gone"),
        pytest.param("ready", "US=,PC=1", id="US-without-digits"),
        pytest.param("ready", "US=3,US=2", id="first-US-is-3"),
    ],
)
def test_task_moved_by_jedi_is_left_untouched(db, settings, status, splitrule):
    add_task(db, settings, 1, status=status, splitrule=splitrule)
    add_task(db, settings, 2)
    before = task_row(db, settings, 1)

    result = write_predictions(db, settings, [make_prediction(1), make_prediction(2)])

    assert result.moved_by_jedi == [1] and result.applied == [2]
    assert task_row(db, settings, 1) == before
    audit = audit_rows(db, settings)
    assert (
        audit[1]["decision"] == MOVED_BY_JEDI and "moved by JEDI" in audit[1]["reason"]
    )
    assert audit[1]["written_at"] is None
    assert audit[2]["decision"] == "applied"


@pytest.mark.parametrize(
    ("splitrule", "written"),
    [
        pytest.param("US=2,PC=1,PC=3", "PC=1,PC=3", id="duplicates-kept"),
        pytest.param("PC=1, US=2", "PC=1", id="space-before-US"),
        pytest.param("NE=10 ,US=2,MF=3", "NE=10 ,MF=3", id="other-bytes-kept"),
    ],
)
def test_only_the_scout_rule_is_removed(db, settings, splitrule, written):
    add_task(db, settings, 1, splitrule=splitrule)

    assert write_predictions(db, settings, [make_prediction(1)]).applied == [1]

    assert task_row(db, settings, 1)["splitrule"] == written


@pytest.mark.parametrize(
    "splitrule",
    [
        pytest.param("PC=1,XUS=2", id="glued-before"),
        pytest.param("US=2X,US=2", id="glued-after"),
    ],
)
def test_malformed_splitrule_keeps_the_scouts_with_its_own_reason(
    db, settings, splitrule
):
    """Not JEDI's move: the task's own data, so not ``moved_by_jedi``."""
    add_task(db, settings, 1, splitrule=splitrule)
    add_task(db, settings, 2)
    before = task_row(db, settings, 1)

    result = write_predictions(db, settings, [make_prediction(1), make_prediction(2)])

    assert result.malformed_splitrule == [1] and result.moved_by_jedi == []
    assert result.applied == [2] and result.audited == 2
    assert task_row(db, settings, 1) == before
    audit = audit_rows(db, settings)[1]
    assert audit["decision"] == "kept_scouts" and audit["written_at"] is None
    assert audit["reason"].startswith(
        "malformed_splitrule: The 'splitRule' field must hold the scout rule"
    )


def test_writing_twice_skips_audited_tasks(db, settings):
    add_task(db, settings, 1)
    write_predictions(db, settings, [make_prediction(1)])
    after_first = task_row(db, settings, 1)
    first_audit = audit_rows(db, settings)

    result = write_predictions(db, settings, [make_prediction(1, cputime=999)])

    assert result.already_audited == [1] and result.audited == 0
    assert task_row(db, settings, 1) == after_first
    assert audit_rows(db, settings) == first_audit


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        pytest.param(
            {"reason": "x" * 401},
            r"jediTaskID=3 .*'reason' field of jediTaskID=3 must be at most 400",
            id="reason-too-long",
        ),
        pytest.param(
            {"model_version": "v" * 65},
            r"jediTaskID=3 .*'model_version' field .* at most 64",
            id="version-too-long",
        ),
    ],
)
def test_failure_rolls_back_everything(db, settings, bad, match):
    for task_id in (1, 2, 3):
        add_task(db, settings, task_id)
    before = {task_id: task_row(db, settings, task_id) for task_id in (1, 2, 3)}
    predictions = [
        make_prediction(1),
        make_prediction(2, "kept_scouts"),
        make_prediction(3),
    ]
    broken = replace(make_prediction(3), **bad)
    predictions[2] = broken

    with pytest.raises(ValueError, match=match):
        write_predictions(db, settings, predictions)

    assert audit_rows(db, settings) == {}
    assert {t: task_row(db, settings, t) for t in (1, 2, 3)} == before


def test_database_failure_rolls_back_and_names_the_task(db, settings):
    from panda_predictor.db.engine import DatabaseError

    add_task(db, settings, 1)
    add_task(db, settings, 2)
    # The audit's NOT NULL model_name makes the database itself refuse task 2. The
    # audit rows go in one statement, so the error names the batch's range (the
    # hook then halves the batch to find the task).
    predictions = [make_prediction(1), replace(make_prediction(2), model_name=None)]

    with pytest.raises(
        DatabaseError,
        match=r"the audit rows of jediTaskID=1\.\.2 failed, nothing was written",
    ):
        write_predictions(db, settings, predictions)

    assert audit_rows(db, settings) == {}
    assert task_row(db, settings, 1)["splitrule"] == "TI=1,US=2"


def test_write_inside_the_callers_transaction(db, settings):
    from panda_predictor.db.reader import find_eligible_tasks

    add_task(db, settings, 1)
    add_task(db, settings, 2)
    with db.begin() as conn:
        ids = find_eligible_tasks(conn, settings, limit=10, lock=True)
        result = write_predictions(conn, settings, [make_prediction(i) for i in ids])
    assert result.applied == [1, 2]
    assert set(audit_rows(db, settings)) == {1, 2}


def test_task_jedi_holds_is_neither_written_nor_audited(db, settings):
    add_task(db, settings, 1, lockedby="JobGenerator-aipanda-1")
    add_task(db, settings, 2)
    before = task_row(db, settings, 1)
    result = write_predictions(db, settings, [make_prediction(1), make_prediction(2)])
    assert (result.locked_by_jedi, result.applied) == ([1], [2])
    assert set(audit_rows(db, settings)) == {2}
    assert task_row(db, settings, 1) == before


def test_error_audits_leave_jedi_untouched_and_keep_an_existing_row(db, settings):
    from panda_predictor.db.audit_writer import TaskFailure, write_error_audits

    add_task(db, settings, 1)
    add_task(db, settings, 2)
    write_predictions(db, settings, [make_prediction(2, "kept_scouts")])
    before = task_row(db, settings, 1)
    audited = write_error_audits(
        db,
        settings,
        [TaskFailure(1, "write failed: " + "x" * 600), TaskFailure(2, "late")],
    )
    assert audited == [1]
    rows = audit_rows(db, settings)
    assert rows[1]["decision"] == "error" and len(rows[1]["reason"]) == 400
    assert rows[2]["decision"] == "kept_scouts"
    assert task_row(db, settings, 1) == before


def test_a_task_jedi_changes_between_read_and_write_is_left_to_jedi(
    db, settings, monkeypatch
):
    """The conditional UPDATE loses to JEDI; the rest of the batch is written."""
    import sqlalchemy as sa

    from panda_predictor.db import writer
    from panda_predictor.db.engine import get_panda_tables

    for task_id in (1, 2, 3):
        add_task(db, settings, task_id)
    read = writer._current_rows

    def jedi_moves_task_2(conn, tasks, ids, lock):
        rows = read(conn, tasks, ids, lock)
        table = get_panda_tables(settings, db).jedi_tasks
        conn.execute(
            sa.update(table).where(table.c.jeditaskid == 2).values(status="scouting")
        )
        return rows

    monkeypatch.setattr(writer, "_current_rows", jedi_moves_task_2)
    result = write_predictions(db, settings, [make_prediction(i) for i in (1, 2, 3)])

    assert (result.applied, result.moved_by_jedi) == ([1, 3], [2])
    assert task_row(db, settings, 2)["splitrule"] == "TI=1,US=2"
    assert task_row(db, settings, 3)["splitrule"] == "TI=1"
    audit = audit_rows(db, settings)
    assert audit[2]["decision"] == MOVED_BY_JEDI
    assert audit[2]["reason"] == "moved by JEDI during the write-back"


def test_tasks_writing_different_columns_share_one_batch(db, settings):
    """A requester's Fixed memory is kept while the other tasks get all four."""
    add_task(db, settings, 1)
    add_task(db, settings, 2, ramcount=2500, ramunit="MBPerCoreFixed")
    add_task(db, settings, 3)

    result = write_predictions(db, settings, [make_prediction(i) for i in (1, 2, 3)])

    assert result.applied == [1, 2, 3]
    assert (
        task_row(db, settings, 2)["ramcount"],
        task_row(db, settings, 2)["ramunit"],
    ) == (
        2500,
        "MBPerCoreFixed",
    )
    for task_id in (1, 3):
        row = task_row(db, settings, task_id)
        assert (row["ramcount"], row["ramunit"]) == (3000, "MBPerCore")
    assert all(task_row(db, settings, t)["splitrule"] == "TI=1" for t in (1, 2, 3))


def test_only_a_tasks_first_prediction_in_a_batch_counts(db, settings):
    add_task(db, settings, 1)
    kept = make_prediction(1, decision="kept_scouts", reason="not confident")

    result = write_predictions(db, settings, [kept, make_prediction(1)])

    assert result.kept_scouts == [1] and result.applied == []
    assert task_row(db, settings, 1)["splitrule"] == "TI=1,US=2"
    assert audit_rows(db, settings)[1]["decision"] == "kept_scouts"


def _master_caps(db, settings, task_id: int) -> dict[str, tuple[int, int]]:
    datasets = get_panda_tables(settings, db).jedi_datasets
    query = sa.select(
        datasets.c.datasetname, datasets.c.nfiles, datasets.c.nfilestobeused
    ).where(datasets.c.jeditaskid == task_id)
    with db.connect() as conn:
        return {
            r.datasetname: (r.nfiles, r.nfilestobeused) for r in conn.execute(query)
        }


@pytest.mark.parametrize("status", ["ready", "defined"])
def test_a_written_task_keeps_no_scout_cap(db, settings, status):
    add_task(
        db,
        settings,
        1,
        status=status,
        datasets=(("input", 50, 5000), ("pseudo_input", 8, 0), ("output", 0, 0)),
    )
    datasets = get_panda_tables(settings, db).jedi_datasets
    with db.begin() as conn:  # JEDI's cap at the scout chunks
        conn.execute(sa.update(datasets).values(nfilestobeused=sa.literal(3)))

    result = write_predictions(db, settings, [make_prediction(1)])

    assert result.applied == [1]
    lifted = {"ds.1.0": (50, 50), "ds.1.1": (8, 8), "ds.1.2": (0, 3)}
    capped = {"ds.1.0": (50, 3), "ds.1.1": (8, 3), "ds.1.2": (0, 3)}
    # A defined task has no files yet; JEDI caps nothing before 'ready'.
    assert _master_caps(db, settings, 1) == (lifted if status == "ready" else capped)
    reason = audit_rows(db, settings)[1]["reason"]
    assert (SCOUT_CAP_LIFTED in reason) is (status == "ready")


def test_a_kept_task_keeps_its_cap(db, settings):
    add_task(db, settings, 1, status="ready", datasets=(("input", 50, 5000),))
    datasets = get_panda_tables(settings, db).jedi_datasets
    with db.begin() as conn:
        conn.execute(sa.update(datasets).values(nfilestobeused=sa.literal(3)))

    write_predictions(db, settings, [make_prediction(1, "kept_scouts")])

    assert _master_caps(db, settings, 1) == {"ds.1.0": (50, 3)}


def test_without_resource_types_the_column_stays_and_the_audit_says_so(db, settings):
    add_task(db, settings, 1, resource_type="SCORE")
    with db.begin() as conn:
        conn.execute(sa.text(f"DELETE FROM {_table(settings, db, 'resource_types')}"))

    write_predictions(db, settings, [make_prediction(1)])

    assert task_row(db, settings, 1)["resource_type"] == "SCORE"
    reason = audit_rows(db, settings)[1]["reason"]
    assert RESOURCE_TYPE_KEPT in reason


def test_disk_counts_are_left_to_panda_and_the_audit_says_why(db, settings):
    add_task(db, settings, 1, outdiskcount=120, workdiskcount=900)

    write_predictions(db, settings, [make_prediction(1)])

    row = task_row(db, settings, 1)
    assert (row["outdiskcount"], row["workdiskcount"]) == (120, 900)
    assert DISK_COUNTS_LEFT in audit_rows(db, settings)[1]["reason"]


def _table(settings, engine, name: str) -> str:
    schema = settings.schema_for(engine.dialect.name)
    return f"{schema}.{name}" if schema else name


def test_the_cap_is_lifted_to_the_usable_files_as_jedi_counts_them(db, settings):
    add_task(
        db,
        settings,
        1,
        status="ready",
        datasets=(("input", 5, 500), ("pseudo_input", 4, 0)),
    )
    tables = get_panda_tables(settings, db)
    statuses = {
        100: ["ready", "ready", "finished", "staging", "missing"],
        101: ["pending"] * 4,  # nothing usable: JEDI keeps the value
    }
    with db.begin() as conn:
        conn.execute(
            sa.update(tables.jedi_datasets).values(nfilestobeused=sa.literal(2))
        )
        conn.execute(
            sa.insert(tables.jedi_dataset_contents),
            [
                {
                    "jeditaskid": 1,
                    "datasetid": d,
                    "fileid": n,
                    "type": "input",
                    "status": status,
                }
                for d, row in statuses.items()
                for n, status in enumerate(row)
            ],
        )

    write_predictions(db, settings, [make_prediction(1)])

    assert _master_caps(db, settings, 1) == {"ds.1.0": (5, 3), "ds.1.1": (4, 2)}
