"""XGBoost classifier: learns the bins, weights rare bins, fast path, early stopping."""

from __future__ import annotations

import numpy as np
import pytest
import xgboost as xgb

from panda_predictor.models import XGBoostResourceClassifier
from panda_predictor.models.latency import make_synthetic_tasks


@pytest.fixture
def split(seed):
    """Return time-ordered train and held-out synthetic tasks."""
    X, y = make_synthetic_tasks(4000, seed)
    return (X.iloc[:3000], y[:3000]), (X.iloc[3000:], y[3000:])


def _model(**kw):
    return XGBoostResourceClassifier(4, n_estimators=60, max_depth=4, **kw)


def test_beats_majority_class(split):
    (X, y), (X_test, y_test) = split
    model = _model().fit(X, y)
    majority = np.mean(y_test == np.bincount(y).argmax())
    accuracy = np.mean(model.predict(X_test) == y_test)
    assert accuracy > majority + 0.2


def test_balanced_weights_raise_rare_class_recall(split):
    (X, y), (X_test, y_test) = split
    rare = y_test == 3
    recall = {
        name: np.mean(_model(class_weight=cw).fit(X, y).predict(X_test)[rare] == 3)
        for name, cw in [("balanced", "balanced"), ("unweighted", None)]
    }
    assert recall["balanced"] > recall["unweighted"] + 0.1


def test_dict_class_weight_is_used(split):
    (X, y), (X_test, _) = split
    heavy = _model(class_weight={3: 50.0}).fit(X, y).predict(X_test)
    plain = _model(class_weight=None).fit(X, y).predict(X_test)
    assert np.sum(heavy == 3) > np.sum(plain == 3)


def test_inplace_predict_matches_dmatrix_predict(split):
    (X, y), (X_test, _) = split
    model = _model().fit(X, y)
    reference = model.booster_.predict(xgb.DMatrix(X_test, enable_categorical=True))
    np.testing.assert_allclose(model.predict_proba(X_test), reference, rtol=1e-6)
    one = X_test.iloc[[7]]
    np.testing.assert_allclose(model.predict_proba(one), reference[[7]], rtol=1e-6)


def test_binary_matches_dmatrix_predict(split):
    (X, y), (X_test, _) = split
    model = _model().set_params(n_classes=2).fit(X, (y == 3).astype(int))
    positive = model.booster_.predict(xgb.DMatrix(X_test, enable_categorical=True))
    proba = model.predict_proba(X_test)
    np.testing.assert_allclose(proba[:, 1], positive, rtol=1e-6)
    np.testing.assert_allclose(proba[:, 0], 1 - positive, rtol=1e-6)


def test_uses_native_categorical_hist_trees(split):
    (X, y), _ = split
    model = _model().fit(X, y)
    config = model.booster_.save_config()
    assert '"tree_method":"hist"' in config
    assert model.booster_.feature_types == ["c", "c", "float", "float"]


def test_early_stopping_on_validation(split):
    (X, y), (X_val, y_val) = split
    # Shuffled validation labels: the loss stops improving after a few rounds.
    rng = np.random.default_rng(0)
    model = XGBoostResourceClassifier(
        4, n_estimators=300, learning_rate=0.3, early_stopping_rounds=5
    ).fit(X, y, X_val=X_val, y_val=rng.permutation(y_val))
    assert model.n_estimators_ < 300
    assert model.booster_.num_boosted_rounds() == model.n_estimators_
    without = XGBoostResourceClassifier(4, n_estimators=30).fit(X, y)
    assert without.n_estimators_ == 30


def test_same_seed_same_model(split):
    (X, y), (X_test, _) = split
    first = _model(random_state=3).fit(X, y).predict_proba(X_test)
    second = _model(random_state=3).fit(X, y).predict_proba(X_test)
    np.testing.assert_array_equal(first, second)


def test_saved_files(split, tmp_path):
    (X, y), _ = split
    _model().fit(X, y).save(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "booster.ubj",
        "meta.json",
    ]


def test_a_forest_per_round_averages_its_trees_and_survives_saving(split, tmp_path):
    (X, y), (X_test, _) = split
    # On all rows every tree of a round is the same tree: their average is one tree.
    single = _model().fit(X, y)
    same = _model(num_parallel_tree=3).fit(X, y)
    np.testing.assert_allclose(
        same.predict_proba(X_test), single.predict_proba(X_test), rtol=1e-5, atol=1e-6
    )
    # On row samples the trees differ, and the saved forest predicts the same.
    forest = _model(num_parallel_tree=3, subsample=0.7, random_state=2).fit(X, y)
    assert '"num_parallel_tree":"3"' in forest.booster_.save_config()
    assert not np.allclose(forest.predict_proba(X_test), single.predict_proba(X_test))
    loaded = XGBoostResourceClassifier.load(forest.save(tmp_path / "forest"))
    assert loaded.num_parallel_tree == 3
    np.testing.assert_array_equal(
        loaded.predict_proba(X_test), forest.predict_proba(X_test)
    )
    one_row = X_test.iloc[:1]
    np.testing.assert_array_equal(
        loaded.predict_proba(one_row), forest.predict_proba(X_test)[:1]
    )


def test_histogram_bins_and_row_sampling_reach_the_booster(split, tmp_path):
    (X, y), (X_test, _) = split
    model = _model(max_bin=32, subsample=0.5, random_state=1).fit(X, y)
    config = model.booster_.save_config()
    assert '"max_bin":"32"' in config and '"subsample":"0.5"' in config
    full = _model(random_state=1).fit(X, y)
    assert not np.allclose(model.predict_proba(X_test), full.predict_proba(X_test))
    loaded = XGBoostResourceClassifier.load(model.save(tmp_path / "m"))
    assert (loaded.max_bin, loaded.subsample) == (32, 0.5)
    np.testing.assert_array_equal(
        loaded.predict_proba(X_test), model.predict_proba(X_test)
    )
