"""The estimator contract both classifier kinds share: validation, schema, classes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.errors import FeatureSchemaError
from panda_predictor.models import (
    KerasResourceClassifier,
    NotFittedError,
    XGBoostResourceClassifier,
    load_classifier,
    model_class,
)
from panda_predictor.models.latency import make_synthetic_tasks

#: Cheap settings per kind: these tests check the contract, not the accuracy.
KINDS = {
    "xgboost": lambda n, **kw: XGBoostResourceClassifier(n, n_estimators=5, **kw),
    "keras": lambda n, **kw: KerasResourceClassifier(n, epochs=1, batch_size=256, **kw),
}
#: Seed of the module-wide fitted models (module fixtures cannot use ``seed``).
MODULE_SEED = 11


@pytest.fixture(scope="module", params=list(KINDS))
def fitted(request):
    """Return (model, X) with a small model of each kind fitted on synthetic tasks."""
    X, y = make_synthetic_tasks(600, MODULE_SEED)
    return KINDS[request.param](4).fit(X, y), X


@pytest.fixture(params=list(KINDS))
def make(request):
    """Return a factory of unfitted models of each kind."""
    return KINDS[request.param]


def _data(seed: int, n: int = 200) -> tuple[pd.DataFrame, np.ndarray]:
    return make_synthetic_tasks(n, seed)


FIT_ERRORS = [
    pytest.param(
        lambda X, y: (X.to_numpy(), y),
        "must be a pandas DataFrame. Got ndarray",
        id="x-not-frame",
    ),
    pytest.param(lambda X, y: (X.iloc[:0], y[:0]), "at least one row", id="x-empty"),
    pytest.param(
        lambda X, y: (X, y.astype(float) * np.where(np.arange(len(y)) == 3, np.nan, 1)),
        "must not contain NaN labels. Got 1 NaN labels instead",
        id="y-nan",
    ),
    pytest.param(
        lambda X, y: (X, np.where(np.arange(len(y)) == 0, 7, y)),
        r"class indices in 0\.\.3\. Got 7 instead",
        id="y-above-range",
    ),
    pytest.param(
        lambda X, y: (X, np.where(np.arange(len(y)) == 0, -1, y)),
        r"class indices in 0\.\.3\. Got -1 instead",
        id="y-negative",
    ),
    pytest.param(
        lambda X, y: (X, np.full(len(y), 2)),
        "must contain at least two classes. Got only class 2 instead",
        id="y-one-class",
    ),
    pytest.param(
        lambda X, y: (X, y[:-1]),
        "one label per row of 'X' .200.. Got 199",
        id="y-short",
    ),
    pytest.param(
        lambda X, y: (X, y + 0.5),
        "integer class indices. Got 0.5 instead",
        id="y-float",
    ),
    pytest.param(
        lambda X, y: (X, y.astype(str)),
        "integer class indices. Got dtype <U",
        id="y-str",
    ),
    pytest.param(
        lambda X, y: (X.assign(site=["CERN"] * len(X)), y),
        "column 'site' must be categorical or numeric. Got (str|object)",
        id="x-object-column",
    ),
]


@pytest.mark.parametrize(("corrupt", "match"), FIT_ERRORS)
def test_fit_rejects_bad_data(make, seed, corrupt, match):
    X, y = corrupt(*_data(seed))
    with pytest.raises(ValueError, match=match):
        make(4).fit(X, y)


@pytest.mark.parametrize(
    ("n_classes", "match"),
    [
        pytest.param(1, "integer >= 2. Got 1 instead", id="one"),
        pytest.param(2.5, "integer >= 2. Got 2.5 instead", id="float"),
        pytest.param(True, "integer >= 2. Got True instead", id="bool"),
    ],
)
def test_fit_rejects_bad_n_classes(make, seed, n_classes, match):
    X, y = _data(seed)
    with pytest.raises(ValueError, match=match):
        make(n_classes).fit(X, y % 2)


def test_fit_requires_x_val_and_y_val_together(make, seed):
    X, y = _data(seed)
    with pytest.raises(ValueError, match="given together. Got only X_val instead"):
        make(4).fit(X, y, X_val=X)


def test_fit_checks_validation_labels(make, seed):
    X, y = _data(seed)
    with pytest.raises(
        ValueError, match=r"'y_val' argument must contain class indices"
    ):
        make(4).fit(X, y, X_val=X, y_val=y + 4)


def test_unknown_class_weight_is_rejected(make, seed):
    X, y = _data(seed)
    with pytest.raises(ValueError, match="'balanced', a dict or None. Got 'even'"):
        make(4, class_weight="even").fit(X, y)


@pytest.mark.parametrize("method", ["predict_proba", "predict", "save"])
def test_unfitted_model_raises_not_fitted(make, seed, tmp_path, method):
    X, _ = _data(seed)
    arg = tmp_path if method == "save" else X
    with pytest.raises(
        NotFittedError, match=f"not fitted yet. Call 'fit' before '{method}'"
    ):
        getattr(make(4), method)(arg)


def test_init_only_stores_parameters(make):
    model = make(3, random_state=5)
    params = model.get_params()
    assert params["n_classes"] == 3 and params["random_state"] == 5
    assert not [name for name in vars(model) if name.endswith("_")]
    model.set_params(class_weight=None)
    assert model.get_params()["class_weight"] is None
    with pytest.raises(ValueError, match="Got 'colour' instead"):
        model.set_params(colour="red")


def test_learned_state(fitted):
    model, X = fitted
    np.testing.assert_array_equal(model.classes_, np.arange(4))
    assert list(model.feature_names_in_) == list(X.columns)
    assert model.n_features_in_ == X.shape[1]
    proba = model.predict_proba(X.iloc[:50])
    assert proba.shape == (50, 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(model.predict(X.iloc[:50]), proba.argmax(axis=1))


def test_column_mismatch_lists_missing_and_unexpected(fitted):
    """Models hold a frame to their schema with the feature pipeline's one check."""
    model, X = fitted
    bad = X.drop(columns=["corecount"]).assign(site=np.float32(1.0))
    with pytest.raises(
        FeatureSchemaError,
        match=r"missing columns \['corecount'\] and unexpected columns \['site'\]",
    ) as info:
        model.predict_proba(bad)
    assert (info.value.missing, info.value.unexpected) == (["corecount"], ["site"])


def test_reordered_columns_predict_the_same(fitted):
    model, X = fitted
    rows = X.iloc[:20]
    np.testing.assert_allclose(
        model.predict_proba(rows[rows.columns[::-1]]), model.predict_proba(rows)
    )


def test_wrong_column_kind_is_rejected(fitted):
    model, X = fitted
    bad = X.assign(corecount=pd.Categorical(X["corecount"].astype(str)))
    with pytest.raises(ValueError, match="column 'corecount' must be numeric"):
        model.predict_proba(bad)


def test_unseen_category_counts_as_unknown(fitted):
    model, X = fitted
    rows = X.iloc[:5].copy()
    cats = list(rows["processingtype"].cat.categories)
    unseen = rows.assign(
        processingtype=pd.Categorical(["brandnew"] * 5, categories=[*cats, "brandnew"])
    )
    unknown = rows.assign(
        processingtype=pd.Categorical(["__unknown__"] * 5, categories=cats)
    )
    np.testing.assert_allclose(
        model.predict_proba(unseen), model.predict_proba(unknown)
    )
    # Reordered categories must not change what a code means.
    reordered = rows.assign(
        processingtype=rows["processingtype"].cat.reorder_categories(cats[::-1])
    )
    np.testing.assert_allclose(
        model.predict_proba(reordered), model.predict_proba(rows)
    )


def test_absent_class_still_gets_a_column(make, seed):
    X, y = _data(seed)
    y = np.where(y == 3, 0, y)
    model = make(5).fit(X, y)
    np.testing.assert_array_equal(model.classes_, np.arange(5))
    proba = model.predict_proba(X.iloc[:10])
    assert proba.shape == (10, 5)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)


def test_two_classes_give_two_columns(make, seed):
    X, y = _data(seed)
    model = make(2).fit(X, (y >= 2).astype(int))
    proba = model.predict_proba(X.iloc[:10])
    assert proba.shape == (10, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    assert set(np.unique(model.predict(X))) <= {0, 1}


def test_save_load_round_trip(fitted, tmp_path):
    model, X = fitted
    model.save(tmp_path / "m")
    loaded = load_classifier(tmp_path / "m", runtime="tensorflow")
    assert type(loaded) is type(model)
    assert loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    # What serving loads by default: a Keras network runs as numpy, same answers.
    served = load_classifier(tmp_path / "m")
    assert served.kind == model.kind
    np.testing.assert_allclose(
        served.predict_proba(X), model.predict_proba(X), rtol=0, atol=1e-5
    )


def test_load_rejects_an_unknown_runtime(fitted, tmp_path):
    model, _ = fitted
    model.save(tmp_path / "m")
    with pytest.raises(ValueError, match=r"'runtime' field must be one of"):
        load_classifier(tmp_path / "m", runtime="onnx")


def test_load_rejects_other_kind(fitted, tmp_path):
    model, _ = fitted
    model.save(tmp_path / "m")
    other = (
        KerasResourceClassifier
        if isinstance(model, XGBoostResourceClassifier)
        else XGBoostResourceClassifier
    )
    with pytest.raises(ValueError, match=f"kind must be '{other.kind}'"):
        other.load(tmp_path / "m")


def test_load_needs_meta(tmp_path):
    with pytest.raises(FileNotFoundError, match="must contain meta.json"):
        load_classifier(tmp_path)


def test_unknown_model_kind_is_rejected():
    with pytest.raises(ValueError, match="one of \\['keras', 'xgboost'\\]. Got 'svm'"):
        model_class("svm")


def test_xgboost_path_does_not_import_tensorflow():
    code = (
        "import sys\n"
        "from panda_predictor.models import XGBoostResourceClassifier\n"
        "assert XGBoostResourceClassifier.kind == 'xgboost'\n"
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        pytest.param(lambda n: np.ones(n - 1), "hold 200 positive finite", id="short"),
        pytest.param(lambda n: np.zeros(n), "hold 200 positive finite", id="zero"),
        pytest.param(
            lambda n: np.r_[np.nan, np.ones(n - 1)], "positive finite", id="nan"
        ),
    ],
)
def test_bad_sample_weights_are_refused(make, seed, weights, match):
    X, y = _data(seed)
    with pytest.raises(ValueError, match=match):
        make(4).fit(X, y, sample_weight=weights(len(y)))


def test_sample_weights_change_what_is_learned(seed):
    """Weighing the newest half only (a time decay taken to its limit) moves the
    model, so the weights really reach the trees."""
    X, y = _data(seed, n=400)
    plain = KINDS["xgboost"](4).fit(X, y)
    newest = np.r_[np.full(200, 1e-3), np.ones(200)]
    weighted = KINDS["xgboost"](4).fit(X, y, sample_weight=newest)
    assert not np.allclose(plain.predict_proba(X), weighted.predict_proba(X))
