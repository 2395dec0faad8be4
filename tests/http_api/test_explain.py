"""Keras explanations: occlusion per feature on the numpy forward pass."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from panda_predictor.http_api.explain import METHOD_OCCLUSION, explain, occlusion
from panda_predictor.models import load_classifier
from panda_predictor.models.keras_net import KerasResourceClassifier
from panda_predictor.models.latency import make_synthetic_tasks


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    X, y = make_synthetic_tasks(1200, 5)
    model = KerasResourceClassifier(4, epochs=3, batch_size=256).fit(X, y)
    numpy_model = load_classifier(model.save(tmp_path_factory.mktemp("k") / "m"))
    names = [str(c) for c in model.feature_names_in_]
    pipeline = SimpleNamespace(
        feature_names_out_=names,
        dtypes_={
            c: pd.CategoricalDtype(model.categories_[c]) for c in model.categories_
        },
    )
    rows = X.iloc[:6]
    M = np.column_stack(
        [
            rows[c].cat.codes.to_numpy(np.float32)
            if c in model.categories_
            else rows[c].to_numpy(np.float32)
            for c in names
        ]
    )
    return numpy_model, pipeline, M


def test_occlusion_is_the_fall_of_the_chosen_log_probability(served):
    model, pipeline, M = served
    chosen = model.predict_proba_matrix(M).argmax(axis=1)
    fall = occlusion(model, M, pipeline, chosen)
    assert fall.shape == (len(M), M.shape[1])
    for j, name in enumerate(pipeline.feature_names_out_):
        occluded = M.copy()
        occluded[:, j] = 0.0 if name in pipeline.dtypes_ else np.nan
        before = model.predict_proba_matrix(M)[np.arange(len(M)), chosen]
        after = model.predict_proba_matrix(occluded)[np.arange(len(M)), chosen]
        np.testing.assert_allclose(
            fall[:, j], np.log(before) - np.log(after), rtol=1e-4, atol=1e-5
        )
    # Some feature matters for some task: not all zeros.
    assert np.abs(fall).max() > 1e-3


def test_explain_lists_keras_features_by_occlusion(served):
    model, pipeline, M = served
    chosen = {"ramcount": model.predict_proba_matrix(M).argmax(axis=1)}
    methods, rows = explain({"ramcount": model}, M, pipeline, chosen, top=3)
    assert methods == {"ramcount": METHOD_OCCLUSION}
    for row in rows:
        top = row["ramcount"]
        assert len(top) == 3
        sizes = [abs(c.contribution) for c in top]
        assert sizes == sorted(sizes, reverse=True)
        names = {c.feature for c in top}
        assert names <= set(pipeline.feature_names_out_)
        for c in top:
            if c.feature in pipeline.dtypes_:
                assert c.value in list(pipeline.dtypes_[c.feature].categories)
