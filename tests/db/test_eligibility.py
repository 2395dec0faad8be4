"""Why a named task is not predicted: one rule at a time, and hook's exit code 4."""

from __future__ import annotations

from datetime import datetime

import pytest
from click.testing import CliRunner

from panda_predictor.cli import main
from panda_predictor.db.audit_writer import write_audit
from panda_predictor.db.eligibility import (
    AUDITED,
    LOCKED,
    NO_SCOUTS,
    NOT_FOUND,
    STATUS,
    why_not_eligible,
)
from panda_predictor.db.engine import make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.settings import load_settings
from tests.test_db_support import add_task, make_prediction

AUDIT_TIME = datetime(2026, 3, 4, 5, 6, 7)


def fill(engine, settings) -> None:
    add_task(engine, settings, 1)
    add_task(engine, settings, 2, status="running")
    add_task(engine, settings, 3, splitrule="TI=1")
    add_task(engine, settings, 4, lockedby="jedi-host-7")
    add_task(engine, settings, 5, status="running")
    audited = make_prediction(
        5, decision="kept_scouts", reason="low confidence", predicted_at=AUDIT_TIME
    )
    write_audit(engine, settings, audited, written=False)


def test_each_rule_is_named(db, settings):
    fill(db, settings)
    with db.connect() as conn:
        found = why_not_eligible(conn, settings, [99, 5, 4, 3, 2, 1])
    assert [(i.jeditaskid, i.rule) for i in found] == [
        (2, STATUS),
        (3, NO_SCOUTS),
        (4, LOCKED),
        (5, AUDITED),
        (99, NOT_FOUND),
    ]
    reasons = {i.jeditaskid: i.reason for i in found}
    assert "'running'" in reasons[2] and "defined or ready" in reasons[2]
    assert "'TI=1'" in reasons[3]
    assert "jedi-host-7" in reasons[4]
    # An audited task says its decision and when, whatever its status now.
    assert reasons[5].startswith(
        "already audited: decision kept_scouts at 2026-03-04 05:06:07 UTC "
        "(low confidence)"
    )
    assert reasons[99] == "not found in JEDI_TASKS"


def test_no_ids_means_no_query(db, settings):
    with db.connect() as conn:
        assert why_not_eligible(conn, settings, []) == []


@pytest.fixture
def home(tmp_path):
    settings = load_settings(home=tmp_path)
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    fill(engine, settings)
    engine.dispose()
    return tmp_path


@pytest.mark.parametrize(
    "task_id, expected",
    [
        (99, "jediTaskID=99 not eligible: not found in JEDI_TASKS"),
        (2, "jediTaskID=2 not eligible: status is 'running'"),
        (
            5,
            "jediTaskID=5 not eligible: already audited: decision kept_scouts at "
            "2026-03-04 05:06:07 UTC",
        ),
    ],
    ids=["not-found", "status", "audited"],
)
def test_dry_run_on_an_ineligible_task_says_why_and_exits_4(home, task_id, expected):
    result = CliRunner().invoke(
        main,
        ["hook", "--task-id", str(task_id), "--dry-run"],
        env={"PANDA_PREDICTOR_HOME": str(home)},
    )
    assert result.exit_code == 4, result.output
    assert expected in result.stderr
    assert "Dry run: 0 tasks predicted" in result.stdout


def test_help_documents_the_exit_codes():
    result = CliRunner().invoke(main, ["hook", "--help"])
    assert result.exit_code == 0
    assert "4  a --task-id is not eligible" in result.output
