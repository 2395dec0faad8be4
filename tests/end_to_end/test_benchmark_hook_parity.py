"""The benchmark measures what the hook serves: one model, the same predictions.

The trace benchmark predicts each period with ``Predictor.predict_table`` and the
labelled history (see ``pipelines/evaluation/trace/log_walk.py``); the hook reads the
history from the database itself and calls ``Predictor.predict``. Trained once, on
SQLite and PostgreSQL, both must give every task the same decision, classes,
confidences and followed experts.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from panda_predictor.bins_file import load_bins
from panda_predictor.db.engine import make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.db.reader import read_task_features
from panda_predictor.hook.submit import SubmitHook
from panda_predictor.serving.predictor import Predictor
from panda_predictor.serving.recent import read_history_frame
from pipelines.simulation import SimulationConfig, simulate_history
from pipelines.simulation.history_writer import load_history
from pipelines.training.config import TrainingConfig
from pipelines.training.dataset import LabelledHistory
from pipelines.training.train import train

LATER = datetime(2100, 1, 1)


@pytest.fixture
def parity_db(settings, seed):
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    config = SimulationConfig(n_tasks=600, n_defined=20, seed=seed)
    load_history(engine, settings, simulate_history(config, progress=False))
    yield settings, engine
    engine.dispose()


def test_benchmark_and_hook_predict_the_same(parity_db):
    settings, engine = parity_db

    def read_history():  # the hook's own reader; the simulated past is long ago
        return read_history_frame(engine, settings, now=LATER, days=100 * 365)

    history = read_history()
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30})
    bundle = train(LabelledHistory(history), load_bins(), config).bundle
    assert bundle.combination is not None and bundle.record_start is not None
    predictor = Predictor(bundle, "panda-predictor", "1")

    hook = SubmitHook(
        settings,
        engine,
        predictor_factory=lambda: predictor,
        history_factory=read_history,
    )
    served = hook.run_once(dry_run=True)
    assert served.failure is None
    ids = [p.jeditaskid for p in served.predictions]
    assert len(ids) == 20

    with engine.connect() as conn:
        tasks = read_task_features(conn, settings, ids)
    table = predictor.predict_table(tasks, history).set_index("jeditaskid")
    assert any(p.decision == "applied" for p in served.predictions)
    for p in served.predictions:
        row = table.loc[p.jeditaskid]
        assert row["decision"] == p.decision
        for target, tp in p.targets.items():
            assert row[f"{target}_class"] == tp.class_index
            np.testing.assert_allclose(row[f"{target}_confidence"], tp.confidence)
    followed = {t: table[f"{t}_expert"] for t in bundle.models}
    assert all(len(f) == len(ids) for f in followed.values())


def test_service_history_gives_the_frame_answer_at_its_time(parity_db):
    """The service's indexed history (as of T) equals the frame route for tasks
    created at T: the HTTP service and the JEDI refiner follow the same experts."""
    from panda_predictor.serving.combination import ServingHistory

    settings, engine = parity_db
    history = read_history_frame(engine, settings, now=LATER, days=100 * 365)
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30})
    predictor = Predictor(
        train(LabelledHistory(history), load_bins(), config).bundle, "p", "1"
    )
    with engine.connect() as conn:
        ids = sorted(history["jeditaskid"].tail(40))
        tasks = read_task_features(conn, settings, ids).assign(creationdate=LATER)
    served = ServingHistory(history, LATER)
    by_frame = predictor.predict_table(tasks, history).set_index("jeditaskid")
    by_index = predictor.predict_records(tasks.to_dict("records"), served)
    assert len(by_index) == len(ids)
    for p in by_index:
        row = by_frame.loc[p.jeditaskid]
        assert row["decision"] == p.decision
        for target, tp in p.targets.items():
            assert row[f"{target}_class"] == tp.class_index
            np.testing.assert_allclose(
                row[f"{target}_confidence"], tp.confidence, rtol=1e-6
            )
    # The experts are really used: some task follows a rule, not the model.
    experts = np.concatenate(
        [by_frame[f"{t}_expert"].to_numpy() for t in predictor.bundle.models]
    )
    assert (experts != "model").any()


def test_hook_http_and_benchmark_write_the_same_values(parity_db):
    """The one decision (serving/decision.py) behind every consumer: for tasks
    defined now, the hook (frame history), the benchmark's column form and the
    HTTP service's records route (history indexed as of now) give every task the
    same decision, written value, class and confidence."""
    from sqlalchemy import update

    from panda_predictor.db.engine import get_panda_tables
    from panda_predictor.http_api.results import predict_tasks
    from panda_predictor.serving.combination import ServingHistory
    from panda_predictor.serving.decision import decide_table

    settings, engine = parity_db
    jedi = get_panda_tables(settings, engine).jedi_tasks
    with engine.begin() as conn:
        conn.execute(
            update(jedi).where(jedi.c.status == "defined").values(creationdate=LATER)
        )

    def read_history():
        return read_history_frame(engine, settings, now=LATER, days=100 * 365)

    history = read_history()
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30})
    predictor = Predictor(
        train(LabelledHistory(history), load_bins(), config).bundle, "p", "1"
    )
    hook = SubmitHook(
        settings,
        engine,
        predictor_factory=lambda: predictor,
        history_factory=read_history,
    )
    served = hook.run_once(dry_run=True)
    assert served.failure is None and len(served.predictions) == 20
    ids = [p.jeditaskid for p in served.predictions]
    with engine.connect() as conn:
        tasks = read_task_features(conn, settings, ids)
    table = decide_table(predictor, tasks, history).set_index("jeditaskid")
    records = tasks.to_dict("records")
    http = {
        r["jediTaskID"]: r
        for r in predict_tasks(
            predictor, records, ServingHistory(history, LATER), explain_features=False
        )
    }
    assert {p.decision for p in served.predictions} >= {"applied"}
    for p in served.predictions:
        row, answer = table.loc[p.jeditaskid], http[p.jeditaskid]
        assert row["decision"] == p.decision == answer["decision"]
        for target, tp in p.targets.items():
            by_http = answer["targets"][target]
            assert row[f"{target}_class"] == tp.class_index == by_http["class_index"]
            np.testing.assert_allclose(
                [row[f"{target}_value"], by_http["value"]], tp.value, rtol=1e-6
            )
            np.testing.assert_allclose(row[f"{target}_confidence"], tp.confidence)
            # The service prints confidences to 4 decimals.
            assert by_http["confidence"] == pytest.approx(tp.confidence, abs=5e-5)
