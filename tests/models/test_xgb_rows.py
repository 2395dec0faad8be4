"""One-row predictions through XGBoost's C call equal ``inplace_predict``'s."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pandas as pd
import pytest

from panda_predictor.models import XGBoostResourceClassifier, xgb_rows
from panda_predictor.models.latency import make_synthetic_tasks


@pytest.fixture(scope="module")
def fitted():
    """Return a fitted 4-class model and a code matrix of held-out tasks."""
    X, y = make_synthetic_tasks(2000, 11)
    model = XGBoostResourceClassifier(4, n_estimators=30, max_depth=4)
    model.fit(X.iloc[:1500], y[:1500])
    return model, X.iloc[1500:], _codes(model, X.iloc[1500:])


def _codes(model, X: pd.DataFrame) -> np.ndarray:
    """Return ``X`` as the model's float32 matrix of category codes."""
    aligned = model._align(X)
    columns = []
    for name in aligned.columns:
        column = aligned[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            codes = column.cat.codes.to_numpy().astype(np.float32)
            columns.append(np.where(codes < 0, np.nan, codes))
        else:
            columns.append(column.to_numpy(dtype=np.float32))
    return np.ascontiguousarray(np.column_stack(columns), dtype=np.float32)


@pytest.mark.parametrize("rows", [1, 7, 64])
def test_the_c_call_gives_inplace_predicts_probabilities_bit_for_bit(fitted, rows):
    model, X, M = fitted
    fast = model.predict_proba_matrix(M[:rows])
    assert model._row_predictor() is not None  # the C call was taken
    reference = model._predict_raw(M[:rows], rows)  # Booster.inplace_predict
    np.testing.assert_array_equal(fast, reference)
    # ... and the codes mean what the DataFrame means.
    np.testing.assert_allclose(fast, model.predict_proba(X.iloc[:rows]), atol=1e-6)


def test_a_binary_model_is_shaped_as_two_columns():
    X, y = make_synthetic_tasks(1500, 12)
    model = XGBoostResourceClassifier(2, n_estimators=20, max_depth=3)
    model.fit(X, (y == 3).astype(int))
    M = _codes(model, X.iloc[:5])
    fast = model.predict_proba_matrix(M)
    assert fast.shape == (5, 2)
    np.testing.assert_array_equal(fast, model._predict_raw(M, 5))


def test_without_the_library_the_model_uses_inplace_predict(fitted, monkeypatch):
    model, _, M = fitted
    expected = model._predict_raw(M[:3], 3)
    monkeypatch.setattr(xgb_rows, "_library", lambda: None)
    with pytest.raises(RuntimeError, match="shared library must be loadable"):
        xgb_rows.RowPredictor(model._single_thread())
    plain = XGBoostResourceClassifier(4)
    plain.__dict__.update(
        {k: v for k, v in model.__dict__.items() if not k.startswith("_row")}
    )
    assert plain._row_predictor() is None
    np.testing.assert_array_equal(plain.predict_proba_matrix(M[:3]), expected)


def test_a_model_that_predicted_rows_still_pickles(fitted):
    model, _, M = fitted
    model.predict_proba_matrix(M[:1])
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(
        again.predict_proba_matrix(M[:2]), model.predict_proba_matrix(M[:2])
    )


def test_each_thread_calls_with_its_own_proxy_and_gets_the_same_answers(fitted):
    """The HTTP service predicts from several threads with one model."""
    model, _, M = fitted
    expected = [model._predict_raw(M[i : i + 1], 1) for i in range(40)]
    rows = model._row_predictor()
    results: dict[int, tuple[list[np.ndarray], object]] = {}

    def predict_all(worker: int) -> None:
        got = [model.predict_proba_matrix(M[i : i + 1]) for i in range(40)]
        results[worker] = (got, rows._threads.call)

    workers = [threading.Thread(target=predict_all, args=(k,)) for k in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len({id(call) for _, call in results.values()}) == 4
    for got, call in results.values():
        assert call.proxy.value  # a proxy matrix was made for that thread
        for answer, reference in zip(got, expected, strict=True):
            np.testing.assert_array_equal(answer, reference)


def test_one_thread_makes_its_proxy_matrix_once_not_per_call(fitted, monkeypatch):
    """A proxy per call is what cost eleven system calls a prediction."""
    model, _, M = fitted
    made = []
    original = xgb_rows._ThreadCall.__init__

    def counting(self, lib):
        made.append(self)
        original(self, lib)

    monkeypatch.setattr(xgb_rows._ThreadCall, "__init__", counting)
    fresh = xgb_rows.RowPredictor(model._single_thread())
    for i in range(5):
        fresh.predict(M[i : i + 1])
    assert len(made) == 1
    assert fresh._threads.call is made[0]
