"""Shadow mode and the rollout share in the database hook, on SQLite and PostgreSQL.

A shadow pass must leave JEDI_TASKS exactly as it was (every row, every column) and
audit each eligible task ``shadow``; the rollout share holds tasks back by a fixed
hash of their jediTaskID.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from panda_predictor.core.decide.rollout import (
    HELD_BACK,
    SHADOW,
    in_rollout,
    would_apply,
)
from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.hook.submit import LEGACY_REASON, SubmitHook
from panda_predictor.metrics import TASKS
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor
from tests.history_parts import load_simulated_panda
from tests.test_db_support import audit_rows

N_DEFINED = 30


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "1")


@pytest.fixture
def history_db(settings, seed):
    """Return settings of a database with a small simulated history + new tasks."""
    return load_simulated_panda(settings, seed, n_tasks=200, n_defined=N_DEFINED)


def jedi_tasks_dump(settings) -> list[tuple[str, ...]]:
    """Return every JEDI_TASKS row, every column, as text, in task order."""
    engine = make_engine(settings)
    tasks = get_panda_tables(settings, engine).jedi_tasks
    with engine.connect() as conn:
        rows = conn.execute(sa.select(tasks).order_by(tasks.c.jeditaskid)).all()
    engine.dispose()
    return [tuple(repr(value) for value in row) for row in rows]


def run_pass(settings, predictor, dry_run=False):
    hook = SubmitHook(
        settings, predictor_factory=lambda: predictor, history_factory=lambda: None
    )
    report = hook.run_once(dry_run=dry_run)
    audits = audit_rows(hook.engine, settings)
    hook.engine.dispose()
    assert report.failure is None
    return report, audits


def test_shadow_pass_leaves_jedi_tasks_identical_and_audits_each_task(
    history_db, predictor
):
    settings = history_db.model_copy(update={"mode": "shadow"})
    before = jedi_tasks_dump(settings)
    # What predict mode would do, without writing (the reference decisions).
    model_says = {
        p.jeditaskid: p.decision
        for p in run_pass(history_db, predictor, dry_run=True)[0].predictions
    }
    shadow_before = TASKS.labels("db", SHADOW)._value.get()
    report, audits = run_pass(settings, predictor)
    assert jedi_tasks_dump(settings) == before
    assert len(before) > N_DEFINED  # the history rows are compared too
    assert sorted(report.shadow) == sorted(model_says) and len(model_says) == (
        N_DEFINED
    )
    assert report.applied == [] and report.kept_scouts == []
    assert sorted(audits) == sorted(model_says)
    assert TASKS.labels("db", SHADOW)._value.get() == shadow_before + N_DEFINED
    for task_id, row in audits.items():
        assert row["decision"] == SHADOW
        assert row["written_at"] is None
        assert row["ramcount_class"] is not None and row["ramcount_value"] > 0
        assert would_apply(row["reason"]) == (model_says[task_id] == "applied")
    assert "applied" in model_says.values()  # so "would apply" was really tested


def test_second_shadow_pass_finds_nothing(history_db, predictor):
    settings = history_db.model_copy(update={"mode": "shadow"})
    run_pass(settings, predictor)
    report, audits = run_pass(settings, predictor)
    assert report.predictions == [] and len(audits) == N_DEFINED


def test_kill_switch_wins_over_shadow(history_db, predictor, tmp_path):
    switch = tmp_path / "off"
    switch.touch()
    settings = history_db.model_copy(
        update={"mode": "shadow", "kill_switch_file": switch}
    )
    report, audits = run_pass(settings, predictor)
    assert sorted(report.kept_scouts) == sorted(audits) and len(audits) == N_DEFINED
    assert {(r["decision"], r["reason"]) for r in audits.values()} == {
        ("kept_scouts", LEGACY_REASON)
    }


def test_share_zero_holds_every_task_back_and_writes_nothing(history_db, predictor):
    settings = history_db.model_copy(update={"rollout_share": 0.0})
    before = jedi_tasks_dump(settings)
    report, audits = run_pass(settings, predictor)
    assert jedi_tasks_dump(settings) == before
    assert len(report.held_back) == N_DEFINED == len(audits)
    assert {row["decision"] for row in audits.values()} == {HELD_BACK}
    assert all(
        row["reason"].startswith("held back (rollout_share=0): would ")
        for row in audits.values()
    )


def test_share_one_is_predict_mode(history_db, predictor):
    model_says = {
        p.jeditaskid: p.decision
        for p in run_pass(history_db, predictor, dry_run=True)[0].predictions
    }
    settings = history_db.model_copy(update={"rollout_share": 1.0})
    report, audits = run_pass(settings, predictor)
    assert report.held_back == [] and report.shadow == []
    assert {t: row["decision"] for t, row in audits.items()} == model_says


def test_half_share_splits_by_the_hash_and_again_the_same_way(history_db, predictor):
    settings = history_db.model_copy(update={"rollout_share": 0.5})
    dry, _ = run_pass(settings, predictor, dry_run=True)
    first = {p.jeditaskid: p.decision for p in dry.predictions}
    report, audits = run_pass(settings, predictor)
    decided = {t: row["decision"] for t, row in audits.items()}
    assert decided == first  # a second run (a new hook) splits the same way
    held = {t for t, d in decided.items() if d == HELD_BACK}
    assert held == {t for t in decided if not in_rollout(t, 0.5)}
    assert sorted(report.held_back) == sorted(held)
    # 30 tasks: 15 expected; 6..24 holds with a probability above 0.999.
    assert 6 <= len(held) <= 24
    dump = {row[0]: row for row in jedi_tasks_dump(settings)}
    for task_id in held:
        row = audits[task_id]
        assert row["written_at"] is None
        assert "US=" in dump[repr(task_id)][_column(settings, "splitrule")]


def _column(settings, name: str) -> int:
    engine = make_engine(settings)
    tasks = get_panda_tables(settings, engine).jedi_tasks
    engine.dispose()
    return [c.name for c in tasks.columns].index(name)
