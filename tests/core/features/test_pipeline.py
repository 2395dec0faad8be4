"""FeaturePipeline: vocabularies, schema, missing values, round trip, errors, parity."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.features.history import (
    RecentHistoryIndex,
    history_feature_names,
)
from panda_predictor.core.features.pipeline import (
    CATEGORICAL_FEATURES,
    FEATURE_PIPELINE_VERSION,
    TASK_COLUMNS,
    TASK_NUMERIC_FEATURES,
    UNKNOWN,
    FeaturePipeline,
    FeatureSchemaError,
    NotFittedError,
    check_frame,
)
from panda_predictor.core.features.task_features import (
    creation_fields,
    creation_times,
    record_creation_fields,
)

T0 = pd.Timestamp("2025-03-01 12:00:00")


def make_tasks(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Return a random tasks frame with every column the pipeline reads."""

    def pick(values: list, p: list[float] | None = None) -> np.ndarray:
        return rng.choice(np.array(values, dtype=object), n, p=p)

    nfiles = rng.integers(0, 500, n).astype(float)
    return pd.DataFrame(
        {
            "jeditaskid": np.arange(n) + 1000,
            "creationdate": T0 + pd.to_timedelta(rng.integers(0, 10**6, n), unit="s"),
            "processingtype": pick(["recon", "deriv", "simul", "evgen", None]),
            "tasktype": pick(["prod", "anal"]),
            "prodsourcelabel": pick(["managed", "user"]),
            "transhome": pick(
                ["Athena-24.0.1", "AthDerivation-24.0.2", "AthGeneration-23.6.1", None]
            ),
            "transuses": pick(["Atlas-24.0.1", None]),
            "transpath": pick(["Reco_tf.py", "Derivation_tf.py", "Gen_tf.py"]),
            "architecture": pick(["x86_64-el9-gcc13-opt", "@el9", None]),
            "corecount": pick([1, 8, 0, None]),
            "workinggroup": pick(["AP_Higgs", "AP_Top", None]),
            "campaign": pick(["MC23", "data24", None]),
            "username": pick([f"user{i}" for i in range(10)]),
            "n_input_datasets": rng.integers(0, 3, n),
            "nfiles_sum": nfiles,
            "nevents_sum": nfiles * rng.integers(0, 2000, n),
        },
        index=pd.RangeIndex(n) * 2 + 5,  # not 0..n-1: alignment is checked
    )


def make_history(rng: np.random.Generator, tasks: pd.DataFrame) -> pd.DataFrame:
    """Return the tasks as labelled history, labels known 1-48 h after creation."""
    history = tasks.copy()
    hours = rng.integers(1, 48, len(tasks))
    history["labels_known_at"] = tasks["creationdate"] + pd.to_timedelta(hours, "h")
    for target in TARGET_NAMES:
        history[target] = rng.lognormal(5, 1, len(tasks))
    return history


@pytest.fixture
def tasks(seed: int) -> pd.DataFrame:
    return make_tasks(np.random.default_rng(seed), 400)


@pytest.fixture
def fitted(tasks: pd.DataFrame) -> FeaturePipeline:
    return FeaturePipeline(min_count=2).fit(tasks)


def test_init_only_stores_parameters() -> None:
    pipeline = FeaturePipeline(min_count=-1, targets=["nope"])
    assert pipeline.get_params()["min_count"] == -1
    assert not hasattr(pipeline, "feature_names_out_")
    assert pipeline.set_params(min_count=3) is pipeline and pipeline.min_count == 3


def test_schema_and_dtypes(fitted: FeaturePipeline, tasks: pd.DataFrame) -> None:
    X = fitted.transform(tasks)
    assert list(X.columns) == fitted.feature_names_out_
    assert fitted.categorical_features_ == list(CATEGORICAL_FEATURES)
    assert fitted.numeric_features_ == list(TASK_NUMERIC_FEATURES) + (
        history_feature_names()
    )
    assert X.index.equals(tasks.index)
    for name in fitted.categorical_features_:
        assert isinstance(X[name].dtype, pd.CategoricalDtype)
        assert X[name].cat.categories[0] == UNKNOWN
        assert X[name].notna().all()
    for name in fitted.numeric_features_:
        assert X[name].dtype == np.float32
    # Without history, the history features exist and are missing.
    assert X[history_feature_names()].isna().all().all()
    assert set(X["framework"].cat.categories) == {
        UNKNOWN,
        "Athena",
        "AthDerivation",
        "AthGeneration",
    }
    assert fitted.check_frame(X) is not None


def test_unseen_null_and_rare_values_go_to_unknown(tasks: pd.DataFrame) -> None:
    train = tasks.copy()
    train.loc[train.index[0], "processingtype"] = "rare_once"
    pipeline = FeaturePipeline(min_count=2).fit(train)
    assert "rare_once" not in pipeline.vocabularies_["processingtype"]
    new = tasks.iloc[:3].copy()
    new["processingtype"] = ["never_seen", None, "recon"]
    new["transhome"] = ["Brand-1.0", None, "Athena-24.0.1"]
    X = pipeline.transform(new)
    assert X["processingtype"].tolist() == [UNKNOWN, UNKNOWN, "recon"]
    assert X["framework"].tolist() == [UNKNOWN, UNKNOWN, "Athena"]
    assert X["release"].tolist() == [UNKNOWN, UNKNOWN, "24.0.1"]
    assert X["processingtype"].dtype == pipeline.dtypes_["processingtype"]


def test_max_categories_keeps_the_most_frequent(tasks: pd.DataFrame) -> None:
    train = tasks.copy()
    train["transpath"] = ["a"] * 300 + ["b"] * 60 + ["c"] * 40
    pipeline = FeaturePipeline(min_count=1, max_categories=3).fit(train)
    assert pipeline.vocabularies_["transpath"] == [UNKNOWN, "a", "b"]


def test_missing_values_do_not_crash_and_are_marked(fitted: FeaturePipeline) -> None:
    rows = pd.DataFrame(
        {c: [None] * 4 for c in TASK_COLUMNS}
        | {
            "corecount": [None, 0, 8, 1],
            "n_input_datasets": [None, 0, 2, 1],
            "nfiles_sum": [None, 0, 10, 0],
            "nevents_sum": [np.nan, 0, 5000, 100],
        }
    )
    rng = np.random.default_rng(0)
    X = fitted.transform(rows, history=make_history(rng, make_tasks(rng, 50)))
    assert X["corecount"].isna().tolist() == [True, True, False, False]
    assert X["multicore"].tolist()[2:] == [1.0, 0.0]
    assert X["counts_known"].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert X["log1p_nfiles"].isna().tolist() == [True, True, False, True]
    assert X["log1p_events_per_file"].iloc[2] == pytest.approx(np.log1p(500.0))
    assert np.isnan(X["log1p_events_per_file"].iloc[3])
    assert X["n_input_datasets"].iloc[1] == 0.0  # no datasets is a real value
    assert (X[list(CATEGORICAL_FEATURES)] == UNKNOWN).all().all()
    # No creation date: the history cannot be placed in time, so it stays missing.
    assert X[history_feature_names()].isna().all().all()


def test_history_frame_and_index_give_identical_features(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tasks = make_tasks(rng, 300)
    history = make_history(rng, make_tasks(rng, 2000))
    pipeline = FeaturePipeline(min_count=2).fit(tasks, history)
    trained = pipeline.transform(tasks, history)
    assert trained[history_feature_names()].notna().to_numpy().mean() > 0.5
    for label in tasks.index[:15]:
        task = tasks.loc[[label]]
        index = RecentHistoryIndex.from_frame(
            history, as_of=task["creationdate"].iloc[0]
        )
        served = pipeline.transform(task, index)
        pd.testing.assert_frame_equal(served, trained.loc[[label]])


def test_to_dict_round_trip_gives_identical_output(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tasks = make_tasks(rng, 300)
    history = make_history(rng, tasks)
    pipeline = FeaturePipeline(min_count=3, targets=["ramcount", "cputime"]).fit(tasks)
    stored = json.loads(json.dumps(pipeline.to_dict()))
    loaded = FeaturePipeline.from_dict(stored)
    assert loaded.schema_hash_ == pipeline.schema_hash_
    assert loaded.version == FEATURE_PIPELINE_VERSION
    pd.testing.assert_frame_equal(
        loaded.transform(tasks, history), pipeline.transform(tasks, history)
    )


def test_schema_hash_changes_with_the_vocabulary(tasks: pd.DataFrame) -> None:
    a = FeaturePipeline(min_count=1).fit(tasks)
    other = tasks.copy()
    other["campaign"] = "MC99"
    assert FeaturePipeline(min_count=1).fit(other).schema_hash_ != a.schema_hash_
    assert FeaturePipeline(min_count=1).fit(tasks).schema_hash_ == a.schema_hash_


@pytest.mark.parametrize(
    ("change", "match"),
    [
        pytest.param({"version": "0"}, "The 'version' field must be '2'", id="version"),
        pytest.param(
            {"schema_hash": "x"},
            "The 'schema_hash' field must match",
            id="tampered-hash",
        ),
    ],
)
def test_from_dict_rejects_other_versions_and_tampering(
    fitted: FeaturePipeline, change: dict, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        FeaturePipeline.from_dict(fitted.to_dict() | change)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda p, t: p.transform(t), id="transform"),
        pytest.param(lambda p, t: p.to_dict(), id="to_dict"),
        pytest.param(lambda p, t: p.check_frame(t), id="check_frame"),
    ],
)
def test_unfitted_pipeline_raises_not_fitted(call, tasks: pd.DataFrame) -> None:
    with pytest.raises(NotFittedError, match="not fitted yet"):
        call(FeaturePipeline(), tasks)


@pytest.mark.parametrize(
    ("edit", "missing", "unexpected"),
    [
        pytest.param(
            lambda X: X.drop(columns=["corecount"]), ["corecount"], [], id="missing"
        ),
        pytest.param(lambda X: X.assign(extra=1.0), [], ["extra"], id="unexpected"),
        pytest.param(
            lambda X: pd.concat(
                [
                    X.drop(columns=["campaign", "multicore"]),
                    pd.DataFrame({"foo": 1, "bar": 2}, index=X.index),
                ],
                axis=1,
            ),
            ["campaign", "multicore"],
            ["foo", "bar"],
            id="both",
        ),
    ],
)
def test_schema_mismatch_lists_missing_and_unexpected(
    fitted: FeaturePipeline, tasks: pd.DataFrame, edit, missing, unexpected
) -> None:
    X = edit(fitted.transform(tasks))
    match = (
        f"missing columns {missing!r} and unexpected columns {unexpected!r}".replace(
            "[", "\\["
        ).replace("]", "\\]")
    )
    with pytest.raises(FeatureSchemaError, match=match) as info:
        fitted.check_frame(X)
    assert info.value.missing == missing
    assert info.value.unexpected == unexpected


def test_check_frame_reorders_and_checks_categories(
    fitted: FeaturePipeline, tasks: pd.DataFrame
) -> None:
    X = fitted.transform(tasks)
    shuffled = X[list(reversed(X.columns))]
    assert list(fitted.check_frame(shuffled).columns) == fitted.feature_names_out_
    assert list(check_frame(shuffled, X.columns).columns) == list(X.columns)
    wrong = X.assign(campaign=X["campaign"].astype(str))
    with pytest.raises(FeatureSchemaError, match="The 'campaign' feature must be"):
        fitted.check_frame(wrong)
    with pytest.raises(FeatureSchemaError, match="Got ndarray instead"):
        check_frame(X.to_numpy(), X.columns)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        pytest.param(
            {"min_count": 0},
            "The 'min_count' field must be a positive",
            id="min-count-zero",
        ),
        pytest.param({"min_count": 2.5}, "The 'min_count' field", id="min-count-float"),
        pytest.param(
            {"max_categories": 0}, "The 'max_categories' field", id="max-categories"
        ),
        pytest.param(
            {"targets": ["ram"]},
            "The 'targets' field must be a list drawn",
            id="targets",
        ),
        pytest.param(
            {"history_groups": "user"}, "The 'history_groups' field", id="groups-string"
        ),
    ],
)
def test_fit_validates_parameters(
    tasks: pd.DataFrame, params: dict, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        FeaturePipeline(**params).fit(tasks)


def _labelled(tasks: pd.DataFrame) -> pd.DataFrame:
    return make_history(np.random.default_rng(3), tasks)


@pytest.mark.parametrize(
    ("frame", "history", "error", "match"),
    [
        pytest.param(
            lambda t: t.drop(columns=["nevents_sum", "campaign"]),
            lambda t: None,
            ValueError,
            "without \\['campaign', 'nevents_sum'\\]",
            id="missing-columns",
        ),
        pytest.param(
            lambda t: t.to_dict(),
            lambda t: None,
            TypeError,
            "The 'tasks' field must be a pandas DataFrame",
            id="not-a-frame",
        ),
        pytest.param(
            lambda t: t,
            lambda t: [1, 2],
            TypeError,
            "must be None, a DataFrame, a HistoryStatistics or a RecentHistoryIndex. "
            "Got list instead",
            id="history-type",
        ),
        pytest.param(
            lambda t: t.assign(creationdate="garbage"),
            _labelled,
            ValueError,
            "The 'creationdate' field must hold dates or datetimes",
            id="bad-creationdate",
        ),
        pytest.param(
            lambda t: t,
            lambda t: _labelled(t).drop(columns="labels_known_at"),
            ValueError,
            "without \\['labels_known_at'\\]",
            id="history-without-labels-known-at",
        ),
    ],
)
def test_transform_rejects_bad_inputs(
    fitted: FeaturePipeline, tasks: pd.DataFrame, frame, history, error, match
) -> None:
    with pytest.raises(error, match=match):
        fitted.transform(frame(tasks), history(tasks))


def test_index_must_cover_the_pipeline_history_features(
    fitted: FeaturePipeline, tasks: pd.DataFrame
) -> None:
    history = make_history(np.random.default_rng(1), tasks)
    index = RecentHistoryIndex.from_frame(history, groups=["user"])
    with pytest.raises(FeatureSchemaError, match="must cover the pipeline's history"):
        fitted.transform(tasks, index)


def test_pipeline_without_history_features(tasks: pd.DataFrame) -> None:
    pipeline = FeaturePipeline(history_groups=[]).fit(tasks)
    X = pipeline.transform(tasks)
    assert pipeline.numeric_features_ == list(TASK_NUMERIC_FEATURES)
    assert X.shape == (
        len(tasks),
        len(CATEGORICAL_FEATURES) + len(TASK_NUMERIC_FEATURES),
    )


def test_fit_needs_rows(tasks: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="at least one row to fit on. Got 0 instead"):
        FeaturePipeline().fit(tasks.iloc[:0])


def test_empty_tasks_and_empty_history_are_fine(
    fitted: FeaturePipeline, tasks: pd.DataFrame
) -> None:
    history = make_history(np.random.default_rng(2), tasks)
    assert fitted.transform(tasks.iloc[:0], history).shape == (
        0,
        len(fitted.feature_names_out_),
    )
    X = fitted.transform(tasks, history.iloc[:0])
    served = fitted.transform(tasks, RecentHistoryIndex.from_frame(history.iloc[:0]))
    pd.testing.assert_frame_equal(X, served)
    assert (X["hist_user_ramcount_log1p_count"] == 0).all()
    assert X["hist_user_ramcount_last"].isna().all()


_TZ = timezone(timedelta(hours=-5))


@pytest.mark.parametrize(
    "values",
    [
        [datetime(2025, 3, 1, 23, 30)],
        [pd.Timestamp("2025-03-02 01:00:00.123456789")],
        [datetime(2025, 3, 1, 22, 0, tzinfo=_TZ)],  # 03:00 UTC, the next day
        [pd.Timestamp("2025-03-01 22:00", tz="Europe/Zurich")],
        [None],
        [None, datetime(2025, 3, 3, 4)],
        [datetime(1500, 1, 1, 5), datetime(2300, 6, 1, 7)],
        [datetime(2025, 3, 1, 4), datetime(2025, 3, 1, 4, tzinfo=_TZ)],
        [pd.NaT],
        [float("nan")],
        ["2025-03-01 07:00"],
        ["not a date"],
        [np.datetime64("2025-03-01T09:00")],
        [date(2025, 3, 1)],
        [datetime(2025, 3, 1, 4), "2025-03-01 07:00"],
    ],
    ids=[
        "naive",
        "timestamp",
        "aware",
        "aware-timestamp",
        "none",
        "none-and-naive",
        "outside-nanoseconds",
        "naive-and-aware",
        "nat",
        "nan",
        "text",
        "bad-text",
        "numpy",
        "date",
        "naive-and-text",
    ],
)
def test_records_read_creation_times_as_the_frame_does(values: list) -> None:
    """The records route reads datetimes without pandas, to the same hour and day."""
    got = record_creation_fields(values)
    expected = creation_fields(creation_times(list(values)))
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == np.float64


def test_matrix_columns_name_the_records_matrix_columns(
    fitted: FeaturePipeline, tasks: pd.DataFrame
) -> None:
    M = fitted.transform_records(tasks.head(3).to_dict("records"))
    columns = fitted.matrix_columns(M)
    assert list(columns) == fitted.feature_names_out_ and len(columns) == M.shape[1]
    for j, name in enumerate(fitted.feature_names_out_):
        np.testing.assert_array_equal(columns[name], M[:, j])
    assert "no_such_feature" not in columns and columns.get("no_such_feature") is None
    names = [fitted.feature_names_out_[-1], "no_such_feature", "corecount"]
    taken = columns.take(names)
    assert taken.dtype == np.float64 and taken.shape == (3, 3)
    np.testing.assert_array_equal(taken[:, 0], M[:, -1])
    assert np.isnan(taken[:, 1]).all()
    np.testing.assert_array_equal(taken[:, 2], columns["corecount"])
    np.testing.assert_array_equal(columns.take(names[::2]), taken[:, ::2])
