"""What the write-back plans for a task decided ``applied``, and why it refuses one.

The plan is made from the task's row as read inside the write transaction; these
cases need no database (the write itself: tests/test_db_writer*.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from panda_predictor.db.tables import panda_tables
from panda_predictor.db.task_updates import (
    LOCKED_BY_JEDI,
    MALFORMED_SPLITRULE,
    WriteOptions,
    id_chunks,
    plan_update,
)
from tests.test_db_support import make_prediction

TASKS = panda_tables(None).jedi_tasks
OPTIONS = WriteOptions(
    fixed_units=False,
    lock=False,
    host="test",
    lock_timeout=None,
    never_below_preset=True,
)


def task_row(**values) -> SimpleNamespace:
    """Return a JEDI_TASKS row as read: eligible, unheld, scouts scheduled."""
    return SimpleNamespace(
        **{"status": "defined", "splitrule": "TI=1,US=2", "lockedby": None, **values}
    )


@pytest.mark.parametrize(
    ("row", "refusal"),
    [
        (None, "task not found in JEDI_TASKS"),
        (task_row(lockedby="JobGenerator"), f"{LOCKED_BY_JEDI}: lockedby=JobGenerator"),
        (
            task_row(status="scouting"),
            "moved by JEDI: status=scouting, splitrule=TI=1,US=2",
        ),
        (task_row(splitrule="TI=1"), "moved by JEDI: status=defined, splitrule=TI=1"),
    ],
    ids=["not-found", "locked", "status-moved", "scouts-gone"],
)
def test_a_task_jedi_has_or_moved_is_refused_with_why(row, refusal):
    assert plan_update(TASKS, make_prediction(1), OPTIONS, row) == refusal


def test_a_scout_rule_that_cannot_be_removed_cleanly_is_refused_as_malformed():
    refusal = plan_update(
        TASKS, make_prediction(1), OPTIONS, task_row(splitrule="PC=1,XUS=2")
    )
    assert isinstance(refusal, str) and refusal.startswith(f"{MALFORMED_SPLITRULE}: ")


def test_ids_go_in_lists_oracle_accepts():
    chunks = list(id_chunks(list(range(2500))))
    assert [len(c) for c in chunks] == [1000, 1000, 500]
    assert [i for c in chunks for i in c] == list(range(2500))
