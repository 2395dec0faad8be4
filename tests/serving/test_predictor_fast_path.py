"""The records fast path predicts exactly what the DataFrame path predicts.

Both model kinds, real bundles trained on the simulated history, many tasks plus the
awkward ones: NULLs, unseen categories, blank text, zero or negative counts, text
numbers, keys missing from the recent history, and no history at all.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from datetime import datetime

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.features.history import RecentHistoryIndex
from panda_predictor.core.features.pipeline import TASK_COLUMNS
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.combination import ServingHistory
from panda_predictor.serving.predictor import FAST_PATH_MAX_ROWS, Predictor

NOW = datetime(2026, 1, 1)


@pytest.fixture(scope="module")
def xgb_predictor(trained_bundle_dir) -> Predictor:
    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "1")


@pytest.fixture(scope="module")
def keras_predictor(labelled_history, tmp_path_factory) -> Predictor:
    """Return a Keras bundle as the hook and the service load it: from its folder,
    so its networks run the numpy forward pass (no TensorFlow)."""
    from panda_predictor.bins_file import load_bins
    from panda_predictor.serving.bundle import save_bundle
    from pipelines.training.config import TrainingConfig
    from pipelines.training.train import train

    config = TrainingConfig(model_kinds=("keras",), keras={"epochs": 2})
    result = train(labelled_history, load_bins(), config)
    folder = save_bundle(result.bundle, tmp_path_factory.mktemp("keras") / "bundle")
    bundle = load_bundle(folder)
    assert {m.runtime for m in bundle.models.values()} == {"numpy"}
    return Predictor(bundle, "panda-predictor", "2")


@pytest.fixture(params=["xgboost", "keras"])
def predictor(request) -> Predictor:
    names = {"xgboost": "xgb_predictor", "keras": "keras_predictor"}
    return request.getfixturevalue(names[request.param])


@pytest.fixture(scope="module")
def history_index(labelled_history) -> RecentHistoryIndex:
    """Return the recent history as of the middle of the simulated period."""
    frame = labelled_history.history
    as_of = frame["labels_known_at"].iloc[len(frame) // 2]
    return RecentHistoryIndex.from_frame(frame, as_of=as_of)


@pytest.fixture(scope="module")
def served_history(labelled_history) -> ServingHistory:
    """Return the same history as a ServingHistory indexed as of that time."""
    frame = labelled_history.history
    return ServingHistory(frame, frame["labels_known_at"].iloc[len(frame) // 2])


def awkward_records(base: dict) -> list[dict]:
    """Return variants of one task record with NULLs, unseen values and odd counts."""
    variants = [
        {"processingtype": None, "transhome": None, "transpath": None},
        {"processingtype": float("nan"), "campaign": np.nan, "username": None},
        {"transhome": "NoSuchFramework-99.9.9", "transpath": "NoSuch_tf.py"},
        {"transhome": "AthGeneration", "architecture": "  "},
        {"transhome": " Athena - 24.0.1 ", "workinggroup": ""},
        {"transhome": "-24.0.1", "tasktype": "__unknown__"},
        {"corecount": 0, "nfiles_sum": 0, "nevents_sum": 0, "n_input_datasets": 0},
        {"corecount": -1, "nfiles_sum": -5, "nevents_sum": None},
        {
            "corecount": None,
            "nfiles_sum": None,
            "nevents_sum": None,
            "n_input_datasets": None,
        },
        {"corecount": "8", "nfiles_sum": "12", "nevents_sum": "not a number"},
        {"corecount": 8.0, "nfiles_sum": 3, "nevents_sum": 1e12},
        {"username": "nobody-seen-before", "processingtype": "brand_new"},
    ]
    return [
        {**base, **v, "jeditaskid": base["jeditaskid"] + i + 1}
        for i, v in enumerate(variants)
    ]


@pytest.fixture(scope="module")
def records(labelled_history) -> list[dict]:
    """Return 300 simulated tasks spread over the period, then the awkward ones."""
    tasks = labelled_history.tasks
    picks = np.linspace(0, len(tasks) - 1, 300).astype(int)
    sample = tasks.iloc[picks].to_dict("records")
    return sample + awkward_records(sample[-1])


def frame_path(predictor: Predictor, frame: pd.DataFrame, history) -> dict:
    """Return per target (probabilities, the model's own classes) of the DataFrame
    path (the classes before the expert combination)."""
    parts = predictor.classified(frame, history)
    return {t: (parts.proba[t], parts.model_chosen[t]) for t in parts.proba}


@pytest.mark.parametrize("with_history", [True, False], ids=["index", "no-history"])
def test_records_features_equal_frame_features(
    xgb_predictor, records, history_index, with_history
):
    features = xgb_predictor.bundle.features
    history = history_index if with_history else None
    frame = pd.DataFrame(records)
    expected = features.to_matrix(features.transform(frame, history))
    got = features.transform_records(records, history)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)
    if with_history:  # the history columns are not all NaN: the test means something
        last_stat = features.feature_names_out_.index("hist_user_walltime_mean2")
        assert np.isfinite(got[:, last_stat]).sum() > 100


def test_history_lookup_rows_equal_frame_lookup(history_index, records):
    frame = pd.DataFrame(records)
    expected = history_index.features(frame).to_numpy()
    np.testing.assert_array_equal(history_index.lookup_rows(records), expected)
    one = history_index.lookup(records[5])
    assert list(one) == history_index.feature_names
    np.testing.assert_array_equal(list(one.values()), expected[5])


@pytest.mark.parametrize("with_history", [True, False], ids=["index", "no-history"])
def test_records_predictions_equal_frame_predictions(
    predictor, records, served_history, with_history
):
    history = served_history if with_history else None
    frame = pd.DataFrame(records)
    assert len(frame) > FAST_PATH_MAX_ROWS  # so predict() takes the DataFrame path
    by_frame = predictor.predict(frame, history, now=NOW)
    by_records = predictor.predict_records(records, history, now=NOW)
    # Both kinds, to the last bit (the Keras pass runs in float64:
    # panda_predictor/models/keras_numpy.py).
    assert by_records == by_frame
    raw = frame_path(predictor, frame, history)
    index = history.index if history is not None else None
    M = predictor.bundle.features.transform_records(records, index)
    for target, model in predictor.bundle.models.items():
        proba, chosen = raw[target]
        fast = model.predict_proba_matrix(M)
        np.testing.assert_allclose(fast, proba, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(
            predictor.bundle.tail_rules[target].predict(fast), chosen
        )
    decisions = {p.decision for p in by_records}
    assert len(by_records) == len(records) and decisions <= {"applied", "kept_scouts"}


def test_one_task_at_a_time_equals_the_batch(predictor, records, served_history):
    batch = predictor.predict_records(records, served_history, now=NOW)
    for i in (0, 150, 299, *range(300, len(records))):
        one = predictor.predict_records([records[i]], served_history, now=NOW)
        assert len(one) == 1
        for target, pred in one[0].targets.items():
            expected = batch[i].targets[target]
            assert pred.class_index == expected.class_index
            assert math.isclose(pred.confidence, expected.confidence, abs_tol=1e-6)
        assert one[0].decision == batch[i].decision


def test_one_task_at_a_time_is_the_batch_to_the_last_bit(
    predictor, records, served_history
):
    """One task's steps run on plain floats (core/decide/row_math.py) and the
    batch's on arrays: the whole prediction, every value, confidence, cost and
    reason, is the same either way, for both model kinds."""
    batch = predictor.predict_records(records, served_history, now=NOW)
    assert len(batch) > 64  # past the boosters' one-row C call too
    for i in range(len(records)):
        one = predictor.predict_records([records[i]], served_history, now=NOW)
        assert one == [batch[i]], records[i]["jeditaskid"]


def test_small_frames_take_the_records_route_with_the_same_result(
    xgb_predictor, records, served_history
):
    frame = pd.DataFrame(records[:5])
    frame["extra_column"] = "ignored"
    got = xgb_predictor.predict(frame, served_history, now=NOW)
    assert got == xgb_predictor.predict_records(records[:5], served_history, now=NOW)
    proba, chosen, _ = xgb_predictor.classify(frame, served_history)
    assert [p.targets["ramcount"].class_index for p in got] == list(chosen["ramcount"])


def test_table_route_equals_the_records(predictor, records, served_history):
    """predict_table gives, as columns, what predict gives as records."""
    frame = pd.DataFrame(records)
    table = predictor.predict_table(frame, served_history)
    assert list(table.columns) == predictor.table_columns()
    expected = predictor.predict(frame, served_history, now=NOW)
    assert table["jeditaskid"].tolist() == [p.jeditaskid for p in expected]
    assert table["decision"].tolist() == [p.decision for p in expected]
    kinds = {
        "cheaper than scouts": "cheaper",
        "scouts cost less": "costs_more",
        "outside training domain": "outside_domain",
    }
    assert table["reason_kind"].tolist() == [
        kinds[p.reason.split(":")[0].split(" (")[0]] for p in expected
    ]
    for target in predictor.bundle.models:
        got = table[[f"{target}_class", f"{target}_value", f"{target}_confidence"]]
        want = [
            (t.class_index, t.value, t.confidence)
            for t in (p.targets[target] for p in expected)
        ]
        assert got[f"{target}_class"].tolist() == [w[0] for w in want]
        assert got[f"{target}_value"].tolist() == [w[1] for w in want]
        np.testing.assert_allclose(
            got[f"{target}_confidence"], [w[2] for w in want], atol=1e-6
        )
    assert set(table["reason_kind"]) >= {"outside_domain"}  # the awkward records
    empty = predictor.predict_table(frame.iloc[:0], served_history)
    assert empty.empty and list(empty.columns) == predictor.table_columns()


def test_vectorised_domain_check_equals_the_per_record_one(xgb_predictor, records):
    frame = pd.DataFrame(records)
    expected = [xgb_predictor._record_in_domain(r) for r in records]
    assert xgb_predictor.in_domain(frame).tolist() == expected
    assert not all(expected)  # the awkward records include unseen ones


def test_unseen_task_outside_the_domain_starts_at_once(xgb_predictor, records):
    record = {**records[0], "transpath": "NoSuch_tf.py", "transhome": "Nope-1.0"}
    (pred,) = xgb_predictor.predict_records([record], None, now=NOW)
    assert pred.decision == "applied"
    assert pred.reason.startswith("outside training domain")


def test_models_that_do_not_take_codes_fall_back_to_frames(
    xgb_predictor, records, served_history
):
    features = copy.copy(xgb_predictor.bundle.features)
    vocab = {k: list(v) for k, v in features.vocabularies_.items()}
    vocab["release"] = [*vocab["release"], "0.0.0-extra"]
    features._set_schema(vocab)
    bundle = dataclasses.replace(xgb_predictor.bundle, features=features)
    fallback = Predictor(bundle, "panda-predictor", "1")
    assert fallback._matrix_fn is None
    got = fallback.predict_records(records[:40], served_history, now=NOW)
    assert got == xgb_predictor.predict(pd.DataFrame(records[:40]), served_history, NOW)


def test_empty_records_give_no_predictions(xgb_predictor):
    assert xgb_predictor.predict_records([], None) == []


@pytest.mark.parametrize(
    ("records_arg", "error", "match"),
    [
        ({"jeditaskid": 1}, TypeError, "must be a list of column -> value maps"),
        ("task", TypeError, "must be a list of column -> value maps"),
        ([("jeditaskid", 1)], TypeError, "Got tuple at position 0"),
        ([{"jeditaskid": 1}], ValueError, "without \\['creationdate'"),
    ],
    ids=["dict", "string", "tuple-record", "missing-keys"],
)
def test_bad_records_are_refused(xgb_predictor, records_arg, error, match):
    with pytest.raises(error, match=match):
        xgb_predictor.predict_records(records_arg, None)


@pytest.mark.parametrize(
    ("shape", "match"),
    [((0, None), "at least one row"), ((2, 3), "Got shape \\(2, 3\\)")],
    ids=["no-rows", "wrong-width"],
)
def test_bad_matrix_is_refused(predictor, shape, match):
    model = predictor.bundle.models["ramcount"]
    width = model.n_features_in_ if shape[1] is None else shape[1]
    with pytest.raises(ValueError, match=match):
        model.predict_proba_matrix(np.zeros((shape[0], width), np.float32))


def test_history_frame_goes_through_the_training_path(
    xgb_predictor, labelled_history, records
):
    features = xgb_predictor.bundle.features
    history = labelled_history.history
    got = features.transform_records(records[:50], history)
    expected = features.to_matrix(
        features.transform(pd.DataFrame(records[:50]), history)
    )
    np.testing.assert_array_equal(got, expected)
    assert set(TASK_COLUMNS) <= set(records[0])


def _at_now(predictions: list) -> list:
    """Return ``predictions`` stamped at NOW (each route stamps its own clock)."""
    return [dataclasses.replace(p, predicted_at=NOW) for p in predictions]


def test_one_record_decision_equals_the_frame_decision(
    xgb_predictor, records, served_history
):
    """decide_records of one record skips the frame; it decides what decide does.

    The awkward records include refused ones (the task checks) and the presets
    of a few tasks, far from the prediction and near it, for the far rule.
    """
    from panda_predictor.core.decide.rollout import route_all
    from panda_predictor.serving.decision import decide, decide_records

    with_presets = [
        {**records[0], "ramcount": 100000, "ramunit": "MBPerCore"},
        {**records[1], "ramcount": 2000, "ramunit": "MBPerCore"},
        {**records[2], "cputime": 5, "cputimeunit": "HS06sPerEvent"},
    ]
    for record in [*records[::25], *records[300:], *with_presets]:
        one = _at_now(decide_records(xgb_predictor, [record], served_history))
        frame = _at_now(decide(xgb_predictor, pd.DataFrame([record]), served_history))
        assert one == frame, record["jeditaskid"]
        routed = decide_records(
            xgb_predictor, [record], served_history, rollout=("shadow", 1.0)
        )
        assert _at_now(routed) == route_all(frame, "shadow", 1.0)
