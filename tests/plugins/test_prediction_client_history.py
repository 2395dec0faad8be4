"""The refiner's in-process client predicts with the history the HTTP service has.

A real database (SQLite and PostgreSQL) holds a simulated recent history; the
refiner's default client, built by JEDI's path from the environment with a champion
in a real MLflow store, reads it in the background and must predict every task
exactly as ``serving.decision.decide`` does on the refresher's current
``ServingHistory``. With the database unreachable it still predicts (no history)
and counts the failed read under ``hook="jedi"``; with the setting 0 it starts no
thread. On PanDA's own DDL the read neither waits for a task row JEDI holds nor
leaves that task out.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from prometheus_client import REGISTRY

from model_registry.registry import register_bundle, set_alias
from panda_predictor import taskdef
from panda_predictor.plugins import jedi_prediction
from panda_predictor.plugins.prediction_client import (
    InProcessClient,
    definition_from_param_map,
)
from panda_predictor.serving.combination import ServingHistory
from panda_predictor.serving.decision import decide
from panda_predictor.serving.recent import read_history_frame
from panda_predictor.settings import load_settings
from pipelines.simulation import SimulationConfig, simulate_history
from pipelines.simulation.history_writer import load_history
from tests.plugins.test_prediction_client import param_maps
from tests.serving.test_history_refresher import fail_first_refresher_start
from tests.test_db_support import audit_rows

#: Generous bound on the refresher's first read (it takes about a second).
FIRST_READ_TIMEOUT = 300.0
#: How long a read beside JEDI's row lock may take before it counts as waiting for
#: the lock (a read of 60 tasks takes about a second; JEDI holds the row longer).
LOCKED_READ_TIMEOUT = 60.0
#: The refiner's thread name (serving/history_refresher.py).
THREAD_NAME = "history-refresher-jedi"
#: Nothing listens on port 1: connecting is refused at once.
UNREACHABLE_DB = "postgresql+psycopg://postgres@127.0.0.1:1/test"
#: When the simulated history ends: recent, so inside the 180 days the client reads.
HISTORY_END = datetime.now(UTC).replace(
    tzinfo=None, hour=0, minute=0, second=0, microsecond=0
) - timedelta(days=7)
#: The one time the tasks are refined at (taskdef's clock stopped for the test).
REFINED_AT = HISTORY_END + timedelta(days=6)


class _RefinedAt(datetime):
    """taskdef's clock, stopped at REFINED_AT: the client and ``decide`` read one
    creation time."""

    @classmethod
    def now(cls, tz=None):
        return REFINED_AT.replace(tzinfo=tz)


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    from panda_predictor.serving.bundle import load_bundle
    from panda_predictor.serving.predictor import Predictor

    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "1")


@pytest.fixture
def recent_db(db, settings, seed):
    """Return the test database holding 600 tasks of the last four months."""
    config = SimulationConfig(
        n_tasks=600, n_defined=20, seed=seed, months=4, end_date=HISTORY_END
    )
    load_history(db, settings, simulate_history(config, progress=False))
    return db


def _history_fallbacks() -> float:
    """Return panda_predictor_fallbacks_total{hook="jedi", reason="history_..."}."""
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "panda_predictor_fallbacks"
        for sample in metric.samples
        if sample.name.endswith("_total")
        and sample.labels.get("hook") == "jedi"
        and sample.labels.get("reason", "").startswith("history_")
    )


def _first_read(refresher, failing=False, timeout=FIRST_READ_TIMEOUT):
    """Wait for the refresher's first read (its thread reads at once) and return
    its index; ``failing``: wait for its first failure instead."""
    deadline = time.monotonic() + timeout
    while (refresher.error is None) if failing else (refresher.index is None):
        assert failing or refresher.error is None, refresher.error
        assert time.monotonic() < deadline, "no history read in time"
        time.sleep(0.05)
    return refresher.index


def _comparable(prediction):
    """Return a prediction without its time stamp (each call stamps its own)."""
    return (
        prediction.jeditaskid,
        prediction.model_version,
        prediction.decision,
        prediction.reason,
        prediction.targets,
    )


def _refiner_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


@pytest.fixture
def refiner_environment(recent_db, settings, empty_mlflow_store, trained_bundle_dir):
    """Set the environment JEDI's refiner reads its settings from (the test
    database, a registry whose champion is the small trained bundle) and return
    those settings; the process-wide client is forgotten before and after."""
    store = settings.home / "registry" / "mlflow.db"
    store.parent.mkdir()
    shutil.copyfile(empty_mlflow_store, store)
    env = {
        "PANDA_PREDICTOR_HOME": str(settings.home),
        "PANDA_PREDICTOR_DB_URL": settings.database_url(),
        "PANDA_PREDICTOR_DB_SCHEMA": settings.db_schema or "",
        "PANDA_PREDICTOR_MLFLOW_TRACKING_URI": f"sqlite:///{store}",
        # One read in the test: the next one would come an hour later.
        "PANDA_PREDICTOR_REFINER_HISTORY_REFRESH_SECONDS": "3600",
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        configured = load_settings()
        set_alias(
            configured,
            register_bundle(configured, trained_bundle_dir, None, {}).version,
            "champion",
        )
        jedi_prediction.reset_shared_client()
        try:
            yield configured
        finally:
            jedi_prediction.reset_shared_client()


def test_refiner_client_predicts_as_decide_on_the_refreshed_history(
    refiner_environment, recent_db, monkeypatch
):
    settings = refiner_environment
    monkeypatch.setattr(taskdef, "datetime", _RefinedAt)
    maps = param_maps(recent_db, settings, limit=20)
    assert len(maps) == 20
    # JEDI's path: the process-wide client built from the environment.
    _, client = jedi_prediction._shared_settings_and_client()
    assert isinstance(client, InProcessClient)
    assert client.history_refresh_seconds == 3600
    assert client.history_refresher is None  # nothing started before a prediction

    first = definition_from_param_map(*maps[0])
    client.predict(first)  # starts the refresher; its history may not be read yet
    refresher = client.history_refresher
    assert refresher is not None and refresher.hook == "jedi"
    served = _first_read(refresher)
    assert isinstance(served, ServingHistory)
    # The champion's expert records were built in the refresher's thread too.
    assert "_snapshots" in vars(served)
    # The service's reader: the last 180 days, as known when it was read.
    expected = read_history_frame(recent_db, settings, served.as_of.to_pydatetime())
    assert len(served.frame) > 100
    assert served.frame["jeditaskid"].tolist() == expected["jeditaskid"].tolist()

    predictor, history = client.current()
    assert history is served
    changed = 0
    for task_id, task_map in maps:
        definition = definition_from_param_map(task_id, task_map)
        got = client.predict(definition)
        tasks = taskdef.read_task_definitions(definition)
        [want] = decide(predictor, tasks, served)
        [alone] = decide(predictor, tasks, None)
        assert _comparable(got) == _comparable(want)
        changed += _comparable(got) != _comparable(alone)
    assert refresher.index is served  # one history for the whole test
    # The history is really used: the experts' records replace the model's own
    # confidences (and may change the class).
    assert changed > 0

    jedi_prediction.reset_shared_client()
    assert not refresher.running
    assert client.history_refresher is None and client._history_engine is None


def test_the_refiner_audits_and_reads_the_history_through_one_engine(
    refiner_environment, recent_db, monkeypatch
):
    """One engine (one connection pool) per JEDI process on db_url: the refiner's
    audit rows (JEDI's thread) and its history reads (the refresher's thread) go
    through the same Engine; a forked child drops the parent's pooled connections
    of it and reads on; the reset disposes of it once."""
    settings = refiner_environment
    monkeypatch.setattr(taskdef, "datetime", _RefinedAt)
    (first_id, first_map), (second_id, second_map) = param_maps(
        recent_db, settings, limit=2
    )
    url = sa.make_url(settings.database_url())
    connected: list[tuple[str, sa.Engine]] = []

    def on_connect(conn):
        if conn.engine.url == url:
            connected.append((threading.current_thread().name, conn.engine))

    parent = pool = None
    sa.event.listen(sa.Engine, "engine_connect", on_connect)
    try:
        # JEDI's path: the process-wide settings, client and audit engine.
        jedi_prediction.predict_into_map(first_id, first_map)
        _, client = jedi_prediction._shared_settings_and_client()
        parent = client.history_refresher
        served = _first_read(parent)
        engines = {e for _, e in connected}
        assert len(engines) == 1, f"expected one engine on db_url, got {engines}"
        [engine] = engines
        assert {name for name, _ in connected} == {"MainThread", THREAD_NAME}
        assert len(served.frame) > 100  # the history still arrives

        # As a forked child sees it: the refresher and the engine's pooled
        # connections are the parent's.
        pool = engine.pool
        client._refresher_pid = jedi_prediction._shared["engines_pid"] = -1
        jedi_prediction.predict_into_map(second_id, second_map)
        child = client.history_refresher
        assert child is not parent and child.running
        assert len(_first_read(child).frame) > 100
        assert engine.pool is not pool  # dispose(close=False): the child's own
        assert {e for _, e in connected} == {engine}
    finally:
        sa.event.remove(sa.Engine, "engine_connect", on_connect)
        if parent is not None:
            parent.stop()
        if pool is not None:
            pool.dispose()  # the parent's after a fork; one process here
    disposed = []
    sa.event.listen(engine, "engine_disposed", disposed.append)
    jedi_prediction.reset_shared_client()
    assert disposed == [engine]
    assert not child.running
    assert {first_id, second_id} <= set(audit_rows(recent_db, settings))


def test_unreachable_database_predicts_without_history_and_counts_it(
    predictor, tmp_path, monkeypatch
):
    monkeypatch.setattr(taskdef, "datetime", _RefinedAt)
    settings = load_settings(home=tmp_path, db_url=UNREACHABLE_DB)
    assert settings.refiner_history_refresh_seconds > 0
    client = InProcessClient(settings, predictor_factory=lambda: predictor)
    definition = definition_from_param_map(7, {"processingType": "simul"})
    before = _history_fallbacks()
    try:
        client.predict(definition)  # starts the refresher; never raises
        refresher = client.history_refresher
        _first_read(refresher, failing=True)
        assert refresher.index is None
        assert refresher.error.startswith("DatabaseError: Cannot reach the database")
        got = client.predict(definition)
    finally:
        client.close()
    assert not refresher.running
    assert _history_fallbacks() == before + 1
    [alone] = decide(predictor, taskdef.read_task_definitions(definition), None)
    assert _comparable(got) == _comparable(alone)


def test_a_refresher_that_cannot_start_is_retried_on_the_next_task(
    predictor, tmp_path, monkeypatch
):
    """No thread left for the refresher: the task is predicted without history,
    counted as ``history_RuntimeError``, and the next task starts the refresher."""
    monkeypatch.setattr(taskdef, "datetime", _RefinedAt)
    settings = load_settings(home=tmp_path, db_url=UNREACHABLE_DB)
    client = InProcessClient(settings, predictor_factory=lambda: predictor)
    definition = definition_from_param_map(11, {"processingType": "simul"})
    failed = fail_first_refresher_start(monkeypatch, "jedi")
    labels = {"hook": "jedi", "reason": "history_RuntimeError"}
    before = REGISTRY.get_sample_value("panda_predictor_fallbacks_total", labels) or 0
    try:
        got = client.predict(definition)
        assert failed == [THREAD_NAME]
        assert client.history_refresher is None
        after = REGISTRY.get_sample_value("panda_predictor_fallbacks_total", labels)
        assert after == before + 1
        client.predict(definition)
        refresher = client.history_refresher
        assert refresher is not None and refresher.running
    finally:
        client.close()
    [alone] = decide(predictor, taskdef.read_task_definitions(definition), None)
    assert _comparable(got) == _comparable(alone)


def test_history_off_starts_no_thread(predictor, tmp_path, monkeypatch):
    monkeypatch.setattr(taskdef, "datetime", _RefinedAt)
    monkeypatch.setenv("PANDA_PREDICTOR_REFINER_HISTORY_REFRESH_SECONDS", "0")
    settings = load_settings(home=tmp_path, db_url=UNREACHABLE_DB)
    client = InProcessClient(settings, predictor_factory=lambda: predictor)
    threads = len(_refiner_threads())
    definition = definition_from_param_map(8, {"processingType": "simul"})
    got = client.predict(definition)
    assert client.current()[1] is None
    assert client.history_refresher is None
    assert len(_refiner_threads()) == threads
    [alone] = decide(predictor, taskdef.read_task_definitions(definition), None)
    assert _comparable(got) == _comparable(alone)


def test_an_explicit_history_factory_wins_over_the_refresher(predictor, tmp_path):
    settings = load_settings(home=tmp_path, db_url=UNREACHABLE_DB)
    served = object()
    client = InProcessClient(
        settings, predictor_factory=lambda: predictor, history_factory=lambda: served
    )
    assert client.current() == (predictor, served)
    assert client.history_refresher is None


def test_a_forked_process_starts_its_own_refresher(predictor, tmp_path, monkeypatch):
    """A child forked after the first prediction has the parent's refresher but
    not its thread: its first prediction starts one of its own."""
    monkeypatch.setattr(taskdef, "datetime", _RefinedAt)
    settings = load_settings(home=tmp_path, db_url=UNREACHABLE_DB)
    client = InProcessClient(settings, predictor_factory=lambda: predictor)
    definition = definition_from_param_map(9, {"processingType": "simul"})
    try:
        client.predict(definition)
        parent = client.history_refresher
        assert parent is not None and parent.running
        client.predict(definition)
        assert client.history_refresher is parent  # same process: kept
        client._refresher_pid = -1  # as a child sees it: started by its parent
        client.predict(definition)
        child = client.history_refresher
        assert child is not None and child is not parent and child.running
    finally:
        client.close()
        parent.stop()


def _finished_task_of_a_loaded_history(engine, settings, seed, monkeypatch) -> int:
    """Load a small simulated history into PanDA's own DDL, refine as of its end,
    and return the id of a finished task (one the history must hold)."""
    config = SimulationConfig(
        n_tasks=60, n_defined=5, seed=seed, months=2, end_date=HISTORY_END
    )
    load_history(engine, settings, simulate_history(config, progress=False))
    monkeypatch.setattr(taskdef, "datetime", _RefinedAt)
    with engine.connect() as conn:
        return conn.execute(
            sa.text(
                "SELECT min(jeditaskid) FROM doma_panda.jedi_tasks "
                "WHERE status = 'finished'"
            )
        ).scalar_one()


@contextlib.contextmanager
def _jedi_holds(engine, task_id: int):
    """Hold JEDI_TASKS' row of ``task_id`` as JEDI does (``SELECT ... FOR UPDATE
    NOWAIT`` in an open transaction) until the block ends, then roll back."""
    with engine.connect() as jedi:
        jedi.begin()
        jedi.execute(
            sa.text(
                "SELECT jeditaskid FROM doma_panda.jedi_tasks WHERE jeditaskid = "
                ":held FOR UPDATE NOWAIT"
            ),
            {"held": task_id},
        ).one()
        try:
            yield
        finally:
            jedi.rollback()


@pytest.mark.postgres
def test_on_panda_s_own_ddl_the_history_is_read_while_jedi_holds_a_task(
    panda_ddl, predictor, seed, monkeypatch
):
    """JEDI's ``SELECT ... FOR UPDATE NOWAIT`` holds a task of PanDA's real
    JEDI_TASKS (build.sh); the refiner's background read of the history neither
    waits for it nor leaves the task out."""
    engine, settings = panda_ddl
    held = _finished_task_of_a_loaded_history(engine, settings, seed, monkeypatch)
    client = InProcessClient(settings, predictor_factory=lambda: predictor)
    definition = definition_from_param_map(10, {"processingType": "simul"})
    try:
        with _jedi_holds(engine, held):
            client.predict(definition)  # starts the refresher
            # A read that waited for JEDI's row would wait until the rollback,
            # which comes only after this bound.
            served = _first_read(client.history_refresher, timeout=LOCKED_READ_TIMEOUT)
            got = client.predict(definition)
    finally:
        client.close()
    assert held in served.frame["jeditaskid"].tolist()
    [want] = decide(predictor, taskdef.read_task_definitions(definition), served)
    assert _comparable(got) == _comparable(want)


@pytest.mark.postgres
def test_on_panda_s_own_ddl_jedi_s_path_audits_while_jedi_holds_a_task(
    panda_ddl, predictor, seed, monkeypatch
):
    """The refiner's whole path as JEDI runs it (one process-wide engine for the
    audit row and the history thread) on PanDA's real JEDI_TASKS while JEDI holds a
    finished task FOR UPDATE NOWAIT: the decision is audited and the held task is
    in the history read, with neither waiting for JEDI's lock."""
    engine, settings = panda_ddl
    held = _finished_task_of_a_loaded_history(engine, settings, seed, monkeypatch)
    client = InProcessClient(
        settings,
        predictor_factory=lambda: predictor,
        engine_provider=functools.partial(jedi_prediction._shared_engine, settings),
    )
    refined_id = 9_000_001  # a task being refined: not in JEDI_TASKS yet
    done = threading.Event()

    def refine() -> None:
        jedi_prediction.predict_into_map(
            refined_id, {"processingType": "simul"}, client=client, settings=settings
        )
        done.set()

    try:
        with _jedi_holds(engine, held):
            threading.Thread(target=refine, daemon=True).start()
            # A write or read that waited for JEDI's row would wait until the
            # rollback, which comes only after these bounds.
            assert done.wait(LOCKED_READ_TIMEOUT), "the refiner waited for JEDI"
            served = _first_read(client.history_refresher, timeout=LOCKED_READ_TIMEOUT)
        assert held in served.frame["jeditaskid"].tolist()
        assert refined_id in audit_rows(engine, settings)
    finally:
        client.close()
        jedi_prediction.reset_shared_client()
