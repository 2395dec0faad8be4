"""The database submit hook end to end, on SQLite and the real PostgreSQL server."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from panda_predictor.core.domain.splitrule import has_scout_rule
from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.db.reader import read_task_features
from panda_predictor.hook.submit import LEGACY_REASON, SubmitHook, run_hook_once
from panda_predictor.metrics import FALLBACKS
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor
from pipelines.simulation import SimulationConfig, simulate_history
from pipelines.simulation.history_writer import load_history
from tests.history_parts import load_simulated_panda
from tests.test_db_support import audit_rows, task_row

N_DEFINED = 12


@pytest.fixture
def history_db(settings, seed):
    """Return settings of a database with a small simulated history + new tasks."""
    return load_simulated_panda(settings, seed, n_tasks=300, n_defined=N_DEFINED)


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "1")


def defined_ids(settings) -> list[int]:
    engine = make_engine(settings)
    t = get_panda_tables(settings, engine).jedi_tasks
    with engine.connect() as conn:
        ids = (
            conn.execute(
                sa.select(t.c.jeditaskid).where(t.c.status.in_(["defined", "ready"]))
            )
            .scalars()
            .all()
        )
    engine.dispose()
    return sorted(ids)


def make_hook(settings, predictor, **kwargs) -> SubmitHook:
    return SubmitHook(
        settings,
        predictor_factory=lambda: predictor,
        history_factory=lambda: None,
        **kwargs,
    )


def test_hook_writes_applied_tasks_and_audits_every_task(history_db, predictor):
    ids = defined_ids(history_db)
    assert len(ids) == N_DEFINED
    hook = make_hook(history_db, predictor)
    report = hook.run_once()
    assert report.failure is None
    assert sorted(report.applied + report.kept_scouts) == ids
    # The model is confident on some of the new tasks: their scouts are skipped.
    assert len(report.applied) >= 1, report.predictions
    audits = audit_rows(hook.engine, history_db)
    assert sorted(audits) == ids
    decisions = [audits[task_id]["decision"] for task_id in ids]
    assert decisions.count("applied") == len(report.applied)
    for task_id in ids:
        row = task_row(hook.engine, history_db, task_id)
        audit = audits[task_id]
        if audit["decision"] == "applied":
            assert not has_scout_rule(row["splitrule"])
            assert row["ramcount"] == audit["ramcount_value"]
            assert row["ramunit"] in ("MBPerCore", "MBPerCoreFixed")
            assert row["walltimeunit"] is not None
        else:
            assert has_scout_rule(row["splitrule"])
            assert row["ramcount"] is None
            assert audit["reason"]
    hook.engine.dispose()


def test_second_pass_writes_nothing(history_db, predictor):
    hook = make_hook(history_db, predictor)
    first = hook.run_once()
    second = hook.run_once()
    assert first.written == N_DEFINED
    assert second.written == 0 and second.predictions == []
    hook.engine.dispose()


def test_dry_run_predicts_every_task_and_writes_nothing(history_db, predictor):
    hook = make_hook(history_db, predictor)
    report = hook.run_once(dry_run=True)
    assert len(report.predictions) == N_DEFINED
    assert report.written == 0
    assert audit_rows(hook.engine, history_db) == {}
    hook.engine.dispose()


def test_task_id_selects_only_that_task(history_db, predictor):
    target = defined_ids(history_db)[3]
    hook = make_hook(history_db, predictor)
    report = hook.run_once(task_ids=[target])
    assert [p.jeditaskid for p in report.predictions] == [target]
    assert list(audit_rows(hook.engine, history_db)) == [target]
    hook.engine.dispose()


@pytest.mark.parametrize("switch", ["mode", "file"])
def test_kill_switch_predicts_nothing_and_audits_each_skip(
    history_db, predictor, tmp_path, switch
):
    if switch == "mode":
        settings = history_db.model_copy(update={"mode": "legacy"})
    else:
        flag = tmp_path / "panda-predictor.off"
        flag.touch()
        settings = history_db.model_copy(update={"kill_switch_file": flag})

    def no_model():
        raise AssertionError("the kill switch must not load a model")

    hook = SubmitHook(settings, predictor_factory=no_model)
    report = hook.run_once()
    assert report.failure is None
    audits = audit_rows(hook.engine, settings)
    assert len(audits) == N_DEFINED
    for task_id, audit in audits.items():
        assert audit["decision"] == "kept_scouts"
        assert audit["reason"] == LEGACY_REASON
        assert has_scout_rule(task_row(hook.engine, settings, task_id)["splitrule"])
    hook.engine.dispose()


def test_task_moved_by_jedi_is_left_alone(history_db, predictor):
    moved = defined_ids(history_db)[0]
    engine = make_engine(history_db)
    tasks = get_panda_tables(history_db, engine).jedi_tasks
    with engine.begin() as conn:
        conn.execute(
            tasks.update().where(tasks.c.jeditaskid == moved).values(status="scouting")
        )
    before = task_row(engine, history_db, moved)
    make_hook(history_db, predictor, engine=engine).run_once()
    assert task_row(engine, history_db, moved) == before
    assert moved not in audit_rows(engine, history_db)
    engine.dispose()


def test_failing_model_fails_open(history_db):
    def broken():
        raise OSError("model artifact is corrupt")

    before = FALLBACKS.labels("db", "OSError")._value.get()
    hook = SubmitHook(
        history_db, predictor_factory=broken, history_factory=lambda: None
    )
    report = hook.run_once()
    assert report.failure == "OSError: model artifact is corrupt"
    assert FALLBACKS.labels("db", "OSError")._value.get() == before + 1
    assert audit_rows(hook.engine, history_db) == {}
    hook.engine.dispose()


def test_unreachable_database_fails_open(tmp_path, predictor):
    from panda_predictor.settings import load_settings

    settings = load_settings(
        home=tmp_path,
        db_url="postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1",
    )
    report = make_hook(settings, predictor).run_once()
    assert report.failure and report.failure.startswith("DatabaseError")
    assert "127.0.0.1" in report.failure
    assert report.written == 0


def test_missing_champion_fails_open(history_db):
    # Eligible tasks, an empty MLflow store: the model is needed and missing.
    report = run_hook_once(history_db)
    assert report.failure and "No champion model" in report.failure
    engine = make_engine(history_db)
    assert audit_rows(engine, history_db) == {}
    engine.dispose()


def test_idle_pass_loads_no_model_and_reads_no_history(history_db, predictor):
    """With no eligible task a pass is one query: no model, no history read."""
    calls = []
    writer = make_hook(history_db, predictor)
    first = writer.run_once()
    writer.engine.dispose()
    assert first.written == N_DEFINED

    def counted(name, value):
        def factory():
            calls.append(name)
            return value

        return factory

    hook = SubmitHook(
        history_db,
        predictor_factory=counted("model", predictor),
        history_factory=counted("history", None),
    )
    report = hook.run_once()
    assert report.failure is None and report.written == 0
    assert calls == []
    hook.engine.dispose()


class SlowPredictor:
    """Wrap a predictor and sleep in predict, so two hooks overlap for sure."""

    def __init__(self, inner: Predictor, delay: float) -> None:
        self.inner = inner
        self.delay = delay

    def predict(self, tasks, history=None):
        time.sleep(self.delay)
        return self.inner.predict(tasks, history)


@pytest.mark.postgres
def test_two_hooks_at_once_never_write_a_task_twice(
    pg_schema, predictor, tmp_path, seed
):
    from panda_predictor.settings import load_settings
    from tests.conftest import POSTGRES_URL

    settings = load_settings(
        home=tmp_path, db_url=POSTGRES_URL, db_schema=pg_schema, hook_batch_size=3
    )
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    config = SimulationConfig(n_tasks=200, n_defined=N_DEFINED, seed=seed)
    load_history(engine, settings, simulate_history(config, progress=False))
    hooks = [make_hook(settings, SlowPredictor(predictor, 0.2)) for _ in range(2)]
    reports = [None, None]

    def run(i: int) -> None:
        reports[i] = hooks[i].run_once()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(r is not None and r.failure is None for r in reports)
    handled = [t for r in reports for t in r.applied + r.kept_scouts]
    assert sorted(handled) == defined_ids(settings)  # each task exactly once
    assert all(r.written > 0 for r in reports)  # SKIP LOCKED let both work
    assert len(audit_rows(engine, settings)) == N_DEFINED
    for hook in hooks:
        hook.engine.dispose()
    engine.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("moment", ["predict", "write"])
def test_backend_killed_mid_run_leaves_nothing_half_written(
    pg_schema, predictor, tmp_path, seed, moment
):
    """The server drops the hook's connections while it predicts the second batch, or
    inside the second batch's write transaction (after its first UPDATE): the first
    batch stays written, every other task is fully written or untouched, none is
    blamed (audited ``error``), and a kill inside the write fails the pass open."""
    from panda_predictor.settings import load_settings
    from tests.conftest import POSTGRES_URL

    app = f"pp-hook-{pg_schema}"
    settings = load_settings(
        home=tmp_path,
        db_url=f"{POSTGRES_URL}?application_name={app}",
        db_schema=pg_schema,
        hook_batch_size=4,
    )
    admin = sa.create_engine(POSTGRES_URL)
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    config = SimulationConfig(n_tasks=200, n_defined=N_DEFINED, seed=seed)
    load_history(engine, settings, simulate_history(config, progress=False))
    engine.dispose()

    def kill() -> None:
        with admin.connect() as conn:
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = :app"
                ),
                {"app": app},
            )

    calls = {"predict": 0, "update": 0}

    class KillingPredictor:
        def predict(self, tasks, history=None):
            calls["predict"] += 1
            if moment == "predict" and calls["predict"] == 2:
                kill()
            return predictor.predict(tasks, history)

    hook = make_hook(settings, KillingPredictor())
    if moment == "write":

        @sa.event.listens_for(hook.engine, "after_cursor_execute")
        def kill_in_second_write(conn, cursor, statement, *args):
            if "writer.write_predictions" in statement and "UPDATE" in statement:
                calls["update"] += 1
                if calls["predict"] == 2 and calls["update"] >= 1:
                    kill()

    report = hook.run_once()
    check = make_engine(settings.model_copy(update={"db_url": POSTGRES_URL}))
    audits = audit_rows(check, settings)
    assert all(a["decision"] != "error" for a in audits.values())
    if moment == "write":
        assert report.failure is not None and "DatabaseError" in report.failure
        assert len(audits) == 4  # the first batch only
    else:  # the write reconnects: a killed backend between transactions is harmless
        assert report.failure is None
    assert sorted(report.applied + report.kept_scouts) == sorted(audits)
    for task_id in defined_ids(settings):
        row = task_row(check, settings, task_id)
        if task_id not in audits:
            assert has_scout_rule(row["splitrule"]) and row["ramcount"] is None
        elif audits[task_id]["decision"] == "applied":
            assert row["ramcount"] == audits[task_id]["ramcount_value"]
            assert not has_scout_rule(row["splitrule"])
    check.dispose()
    hook.engine.dispose()
    admin.dispose()


def test_recent_history_reads_only_what_was_known(history_db):
    """The serving index sees finished scouts of the last days, nothing after now."""
    from datetime import datetime

    from panda_predictor.serving.recent import read_serving_history

    engine = make_engine(history_db)
    ids = defined_ids(history_db)
    tasks = get_panda_tables(history_db, engine).jedi_tasks
    with engine.connect() as conn:
        last = conn.execute(sa.select(sa.func.max(tasks.c.creationdate))).scalar()
    known = read_serving_history(engine, history_db, now=last, days=3650).index
    before_all = read_serving_history(engine, history_db, now=datetime(2000, 1, 1))
    before_all = before_all.index
    frame = read_task_features(engine, history_db, ids)
    engine.dispose()
    seen = known.features(frame)
    empty = before_all.features(frame)
    count = [c for c in seen.columns if c.endswith("_log1p_count")]
    assert (seen[count].to_numpy() > 0).any()
    assert (empty[count].fillna(0).to_numpy() == 0).all()
