"""The hook's write path: a poison task costs only itself, JEDI's LOCKEDBY is
respected, faults leave tasks untouched or fully written. SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa

from panda_predictor.core.domain.splitrule import has_scout_rule
from panda_predictor.db.engine import get_panda_tables
from panda_predictor.hook.isolation import isolate
from panda_predictor.hook.submit import SubmitHook
from panda_predictor.metrics import FALLBACKS, TASKS
from tests.test_db_support import audit_rows, make_prediction, task_row

N_TASKS = 1000
FIRST_ID = 5_000_001
POISON = FIRST_ID + 617


def add_eligible_tasks(engine, settings, count: int, overrides=None) -> list[int]:
    """Insert ``count`` defined tasks waiting for scouts, in one statement."""
    tasks = get_panda_tables(settings, engine).jedi_tasks
    ids = list(range(FIRST_ID, FIRST_ID + count))
    rows = [
        {
            "jeditaskid": task_id,
            "taskname": f"task.{task_id}",
            "status": "defined",
            "splitrule": "TI=1,US=2",
            "prodsourcelabel": "managed",
            "creationdate": datetime(2026, 11, 1),
            "modificationtime": datetime(2026, 11, 1),
            "lockedby": None,
        }
        for task_id in ids
    ]
    for row in rows:
        row.update((overrides or {}).get(row["jeditaskid"], {}))
    with engine.begin() as conn:
        conn.execute(sa.insert(tasks), rows)
    return ids


class FakePredictor:
    """Predicts every task ``applied`` (our Predictor's interface, no model).

    ``poison`` makes one task fail: ``predict`` raises when it is in the batch, or
    its prediction carries a reason too long for the audit column (the writer
    refuses it), or nothing (the task row itself is the poison).
    """

    model_name = "fake"
    model_version = "1"

    def __init__(self, poison: int | None = None, kind: str = "") -> None:
        self.poison = poison
        self.kind = kind
        self.calls = 0

    def predict(self, tasks, history=None):
        self.calls += 1
        ids = [int(task_id) for task_id in tasks["jeditaskid"]]
        if self.kind == "predict" and self.poison in ids:
            raise ValueError(f"The features of jediTaskID={self.poison} are NaN.")
        return [
            make_prediction(
                task_id,
                reason="x" * 500
                if (self.kind == "write" and task_id == self.poison)
                else "confident",
            )
            for task_id in ids
        ]


def make_hook(settings, predictor, engine) -> SubmitHook:
    return SubmitHook(
        settings,
        engine=engine,
        predictor_factory=lambda: predictor,
        history_factory=lambda: None,
    )


@pytest.mark.parametrize("kind", ["predict", "write", "splitrule"])
def test_poison_task_among_1000_costs_only_itself(db, settings, kind):
    overrides = {POISON: {"splitrule": "US=2,XX"}} if kind == "splitrule" else {}
    ids = add_eligible_tasks(db, settings, N_TASKS, overrides)
    before = task_row(db, settings, POISON)
    predictor = FakePredictor(POISON, kind)
    errors_before = TASKS.labels("db", "error")._value.get()
    settings = settings.model_copy(update={"hook_batch_size": 200})

    report = make_hook(settings, predictor, db).run_once()

    assert report.failure is None
    audits = audit_rows(db, settings)
    assert sorted(audits) == ids
    others = [task_id for task_id in ids if task_id != POISON]
    if kind == "splitrule" and audits[POISON]["decision"] == "applied":
        # SPLITRULE parsing learnt to keep an unknown rule: no poison any more.
        others = ids
    else:
        assert report.errors == [POISON]
        assert audits[POISON]["decision"] == "error"
        assert str(POISON) in audits[POISON]["reason"] or kind == "predict"
        assert audits[POISON]["reason"].startswith(
            "prediction failed" if kind == "predict" else "write failed"
        )
        assert task_row(db, settings, POISON) == before  # JEDI row untouched
        assert TASKS.labels("db", "error")._value.get() == errors_before + 1
    assert sorted(report.applied) == others
    for task_id in others[::97]:
        row = task_row(db, settings, task_id)
        assert not has_scout_rule(row["splitrule"]) and row["ramcount"] == 3000
    if kind == "predict":
        # 5 batches, then halving 200 -> 1 along one branch: 2 calls per level.
        assert predictor.calls <= 5 + 2 * 8
    again = make_hook(settings, predictor, db).run_once()
    assert again.written == 0 and again.predictions == []  # never picked again


def test_every_task_failing_alike_blames_none_and_fails_open(db, settings):
    add_eligible_tasks(db, settings, 10)

    class Broken:
        def predict(self, tasks, history=None):
            raise RuntimeError("feature pipeline lost a column")

    before = FALLBACKS.labels("db", "SystemicFailure")._value.get()
    report = make_hook(settings, Broken(), db).run_once()
    assert report.failure and "all 10 tasks of the batch failed alike" in report.failure
    assert audit_rows(db, settings) == {}
    assert FALLBACKS.labels("db", "SystemicFailure")._value.get() == before + 1


def test_task_locked_by_jedi_is_skipped_and_does_not_stall_the_rest(db, settings):
    ids = add_eligible_tasks(
        db, settings, 5, {FIRST_ID: {"lockedby": "JobGenerator-host-1"}}
    )
    before = task_row(db, settings, FIRST_ID)
    settings = settings.model_copy(update={"hook_batch_size": 2})
    report = make_hook(settings, FakePredictor(), db).run_once()
    assert sorted(report.applied) == ids[1:]
    assert FIRST_ID not in audit_rows(db, settings)
    assert task_row(db, settings, FIRST_ID) == before
    # JEDI lets go: the next pass handles it.
    tasks = get_panda_tables(settings, db).jedi_tasks
    with db.begin() as conn:
        conn.execute(
            tasks.update().where(tasks.c.jeditaskid == FIRST_ID).values(lockedby=None)
        )
    assert make_hook(settings, FakePredictor(), db).run_once().applied == [FIRST_ID]


def test_task_jedi_locks_while_the_model_runs_is_not_written(db, settings):
    ids = add_eligible_tasks(db, settings, 3)
    taken = ids[1]
    tasks = get_panda_tables(settings, db).jedi_tasks

    class JediTakesOne(FakePredictor):
        def predict(self, frame, history=None):
            with db.begin() as conn:  # JEDI's own transaction, committed
                conn.execute(
                    tasks.update()
                    .where(tasks.c.jeditaskid == taken)
                    .values(lockedby="ContentsFeeder")
                )
            return super().predict(frame, history)

    before = task_row(db, settings, taken)
    report = make_hook(settings, JediTakesOne(), db).run_once()
    assert report.locked_by_jedi == [taken]
    assert sorted(report.applied) == [ids[0], ids[2]]
    assert taken not in audit_rows(db, settings)
    assert task_row(db, settings, taken) == {**before, "lockedby": "ContentsFeeder"}


def test_kill_switch_writes_no_value_and_audits_each_task(db, settings, tmp_path):
    ids = add_eligible_tasks(db, settings, 7)
    flag = tmp_path / "panda-predictor.off"
    flag.touch()
    settings = settings.model_copy(
        update={"kill_switch_file": flag, "hook_batch_size": 3}
    )
    before = {task_id: task_row(db, settings, task_id) for task_id in ids}
    report = make_hook(settings, FakePredictor(), db).run_once()
    assert report.failure is None and sorted(report.kept_scouts) == ids
    assert {a["decision"] for a in audit_rows(db, settings).values()} == {"kept_scouts"}
    assert all(task_row(db, settings, t) == before[t] for t in ids)


@pytest.mark.parametrize(
    ("failing", "expected_calls"),
    [([], 1), ([3], 1 + 2 + 2 + 2), ([0, 1, 2, 3, 4, 5, 6, 7], None)],
    ids=["none", "one", "all"],
)
def test_isolate_halves_until_the_failing_item(failing, expected_calls):
    calls = []

    def attempt(part):
        calls.append(part)
        if any(item in failing for item in part):
            raise ValueError(f"bad item in {part}")
        return part

    items = list(range(8))
    if expected_calls is None:
        with pytest.raises(RuntimeError, match="all 8 tasks of the batch failed"):
            isolate(items, attempt, lambda item: item)
        return
    results, failures = isolate(items, attempt, lambda item: item)
    assert sorted(i for part in results for i in part) == sorted(
        set(items) - set(failing)
    )
    assert [task_id for task_id, _ in failures] == failing
    assert len(calls) == expected_calls


def test_isolate_never_blames_a_task_for_a_lost_database():
    def attempt(part):
        raise sa.exc.OperationalError("INSERT", {}, Exception("server closed"))

    with pytest.raises(sa.exc.OperationalError):
        isolate([1, 2, 3], attempt, lambda item: item)
