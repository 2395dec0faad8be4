"""Recent-history features: leakage rule, statistics, train/serve parity, speed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.features.history import (
    HISTORY_GROUPS,
    HISTORY_STATS,
    RecentHistoryIndex,
    history_feature_names,
    history_features_at_creation,
    split_transhome,
)

T0 = pd.Timestamp("2025-03-01 12:00:00")


def make_frames(
    rng: np.random.Generator, n_tasks: int, n_history: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return a random tasks frame and a labelled history frame with shared keys."""
    transpaths = np.array(["Reco_tf.py", "Derivation_tf.py", "Sim_tf.py", None], object)
    homes = np.array(["Athena-24.0.1", "AthDerivation-24.0.2", "Athena-23.0.5", None])
    ptypes = np.array(["recon", "deriv", "simul", None], object)
    users = np.array([f"user{i}" for i in range(20)] + [None], object)

    def keys(n: int) -> dict[str, np.ndarray]:
        return {
            "transpath": rng.choice(transpaths, n, p=[0.3, 0.3, 0.3, 0.1]),
            "transhome": rng.choice(homes, n, p=[0.3, 0.3, 0.3, 0.1]),
            "processingtype": rng.choice(ptypes, n, p=[0.3, 0.3, 0.3, 0.1]),
            "username": rng.choice(users, n),
        }

    # Whole minutes so that exact ties between creation and label times happen.
    minutes = rng.integers(0, 30 * 24 * 60, n_tasks)
    tasks = pd.DataFrame(
        {"jeditaskid": np.arange(n_tasks) + 10_000, **keys(n_tasks)},
        index=pd.RangeIndex(n_tasks) * 3 + 7,  # not 0..n-1: alignment is checked
    )
    tasks["creationdate"] = T0 + pd.to_timedelta(minutes, unit="min")
    h_minutes = rng.integers(-5 * 24 * 60, 30 * 24 * 60, n_history)
    history = pd.DataFrame(
        {"jeditaskid": np.arange(n_history), **keys(n_history)},
    )
    history["labels_known_at"] = T0 + pd.to_timedelta(h_minutes, unit="min")
    for target in TARGET_NAMES:
        values = rng.lognormal(6, 1, n_history)
        values[rng.random(n_history) < 0.1] = np.nan
        history[target] = values
    return tasks, history


def one_task(**overrides: object) -> pd.DataFrame:
    row = {
        "jeditaskid": 1,
        "creationdate": T0,
        "transpath": "Reco_tf.py",
        "transhome": "Athena-24.0.1",
        "processingtype": "recon",
        "username": "alice",
    }
    row.update(overrides)
    return pd.DataFrame([row])


def one_history(known_at: pd.Timestamp, ramcount: float, **overrides) -> pd.DataFrame:
    frame = one_task(jeditaskid=99, **overrides).drop(columns="creationdate")
    frame["labels_known_at"] = known_at
    frame["ramcount"] = ramcount
    return frame


def test_statistics_are_last_mean_of_two_and_log1p_count() -> None:
    history = pd.concat(
        [
            one_history(T0 - pd.Timedelta(hours=3), 1000.0),
            one_history(T0 - pd.Timedelta(hours=2), 2000.0),
            one_history(T0 - pd.Timedelta(hours=1), 4000.0),
            one_history(T0 - pd.Timedelta(hours=1), np.nan),  # unknown: not counted
        ]
    )
    got = history_features_at_creation(one_task(), history).iloc[0]
    assert got["hist_trf_release_ramcount_last"] == 4000.0
    assert got["hist_trf_release_ramcount_mean2"] == 3000.0
    assert got["hist_trf_release_ramcount_log1p_count"] == pytest.approx(np.log1p(3))
    assert got["hist_user_ramcount_last"] == 4000.0
    # Only ramcount is in this history: the other targets are NaN, counts too.
    assert np.isnan(got["hist_user_cputime_last"])
    assert np.isnan(got["hist_user_cputime_log1p_count"])


def test_one_value_gives_mean_of_two_equal_to_it() -> None:
    history = one_history(T0 - pd.Timedelta(hours=1), 1500.0)
    got = history_features_at_creation(one_task(), history).iloc[0]
    assert got["hist_proctype_framework_ramcount_mean2"] == 1500.0
    assert got["hist_proctype_framework_ramcount_log1p_count"] == pytest.approx(
        np.log1p(1)
    )


@pytest.mark.parametrize(
    ("delta", "counted"),
    [
        pytest.param(pd.Timedelta(seconds=-1), True, id="known-before"),
        pytest.param(pd.Timedelta(0), False, id="known-at-creation"),
        pytest.param(pd.Timedelta(seconds=1), False, id="known-after"),
    ],
)
def test_leakage_only_rows_known_strictly_before_creation_count(
    delta: pd.Timedelta, counted: bool
) -> None:
    earlier = one_history(T0 - pd.Timedelta(days=1), 1000.0)
    base = history_features_at_creation(one_task(), earlier)
    with_row = history_features_at_creation(
        one_task(), pd.concat([earlier, one_history(T0 + delta, 9000.0)])
    )
    changed = not base.equals(with_row)
    assert changed is counted
    expected_last = 9000.0 if counted else 1000.0
    assert with_row["hist_trf_release_ramcount_last"].iloc[0] == expected_last
    index = RecentHistoryIndex.from_frame(
        pd.concat([earlier, one_history(T0 + delta, 9000.0)]), as_of=T0
    )
    assert index.features(one_task())["hist_user_ramcount_last"].iloc[0] == (
        expected_last
    )


def test_keys_must_match_in_every_column_and_framework_is_the_transhome_prefix() -> (
    None
):
    history = pd.concat(
        [
            # Same transpath, other release: only the proctype/framework group matches.
            one_history(T0 - pd.Timedelta(hours=2), 500.0, transhome="Athena-25.0.0"),
            one_history(T0 - pd.Timedelta(hours=1), 700.0, username="bob"),
        ]
    )
    got = history_features_at_creation(one_task(), history).iloc[0]
    assert got["hist_trf_release_ramcount_last"] == 700.0
    assert got["hist_trf_release_ramcount_log1p_count"] == pytest.approx(np.log1p(1))
    assert got["hist_proctype_framework_ramcount_log1p_count"] == pytest.approx(
        np.log1p(2)
    )
    assert got["hist_user_ramcount_last"] == 500.0


def test_null_keys_and_times_mean_not_seen_or_unknown() -> None:
    history = pd.concat(
        [
            one_history(T0 - pd.Timedelta(hours=1), 800.0, username=None),
            one_history(pd.NaT, 900.0),  # never known: ignored
        ]
    )
    tasks = pd.concat(
        [one_task(username=None), one_task(jeditaskid=2, creationdate=pd.NaT)],
        ignore_index=True,
    )
    got = history_features_at_creation(tasks, history)
    # A NULL user matches nothing (not even another NULL): seen 0 times.
    assert got["hist_user_ramcount_log1p_count"].iloc[0] == 0.0
    assert np.isnan(got["hist_user_ramcount_last"].iloc[0])
    assert got["hist_trf_release_ramcount_last"].iloc[0] == 800.0
    # No creation date: nothing can be said about the past.
    assert got.iloc[1].isna().all()


def test_train_and_serve_paths_agree_for_the_same_as_of_time(seed: int) -> None:
    tasks, history = make_frames(np.random.default_rng(seed), 300, 3000)
    trained = history_features_at_creation(tasks, history)
    assert trained.notna().to_numpy().mean() > 0.5  # the comparison is not vacuous
    for label in tasks.index[:20]:
        task = tasks.loc[[label]]
        index = RecentHistoryIndex.from_frame(
            history, as_of=task["creationdate"].iloc[0]
        )
        served = index.features(task)
        pd.testing.assert_frame_equal(served, trained.loc[[label]])


def test_index_lookup_of_one_task_matches_its_frame_row(seed: int) -> None:
    tasks, history = make_frames(np.random.default_rng(seed), 5, 500)
    index = RecentHistoryIndex.from_frame(history)
    row = tasks.iloc[0]
    got = index.lookup(row.to_dict())
    expected = index.features(tasks.iloc[[0]]).iloc[0]
    assert list(got) == index.feature_names
    np.testing.assert_array_equal(np.array(list(got.values())), expected.to_numpy())


def test_index_without_as_of_uses_everything_known() -> None:
    history = pd.concat(
        [
            one_history(T0 - pd.Timedelta(days=1), 1000.0),
            one_history(T0 + pd.Timedelta(days=1), 3000.0),
        ]
    )
    index = RecentHistoryIndex.from_frame(history)
    assert index.as_of is None
    got = index.features(one_task())
    assert got["hist_trf_release_ramcount_mean2"].iloc[0] == 2000.0


def test_timezone_aware_times_are_compared_in_utc() -> None:
    history = one_history(pd.Timestamp("2025-03-01 13:30", tz="Europe/Zurich"), 10.0)
    before = history_features_at_creation(one_task(creationdate=T0), history)
    after = history_features_at_creation(
        one_task(creationdate=T0 + pd.Timedelta(minutes=31)), history
    )
    # 13:30 in Zurich (UTC+1) is 12:30 UTC: after T0, before T0 + 31 min.
    assert np.isnan(before["hist_user_ramcount_last"].iloc[0])
    assert after["hist_user_ramcount_last"].iloc[0] == 10.0


@pytest.mark.parametrize(
    ("value", "framework", "release"),
    [
        pytest.param("AthGeneration-24.0.1", "AthGeneration", "24.0.1", id="usual"),
        pytest.param(
            "Athena-22.0.1-x86_64", "Athena", "22.0.1-x86_64", id="two-dashes"
        ),
        pytest.param("AnalysisBase", "AnalysisBase", None, id="no-release"),
        pytest.param("  ", None, None, id="blank"),
        pytest.param(None, None, None, id="null"),
    ],
)
def test_split_transhome(value, framework, release) -> None:
    fw, rel = split_transhome(pd.Series([value], dtype=object))
    assert (fw.iloc[0] if fw.notna().iloc[0] else None) == framework
    assert (rel.iloc[0] if rel.notna().iloc[0] else None) == release


@pytest.mark.parametrize(
    ("drop", "frame", "match"),
    [
        pytest.param(
            "labels_known_at",
            "history",
            "without \\['labels_known_at'\\]",
            id="history-no-time",
        ),
        pytest.param(
            "transhome",
            "history",
            "without \\['transhome'\\]",
            id="history-no-transhome",
        ),
        pytest.param(
            "creationdate",
            "tasks",
            "without \\['creationdate'\\]",
            id="tasks-no-creationdate",
        ),
        pytest.param(
            "username", "tasks", "without \\['username'\\]", id="tasks-no-username"
        ),
    ],
)
def test_missing_columns_are_named(drop: str, frame: str, match: str) -> None:
    tasks, history = one_task(), one_history(T0, 1.0)
    if frame == "tasks":
        tasks = tasks.drop(columns=drop)
    else:
        history = history.drop(columns=drop)
    with pytest.raises(ValueError, match=match):
        history_features_at_creation(tasks, history)


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(
            lambda h: RecentHistoryIndex.from_frame(h, groups=["x"]), id="index"
        ),
        pytest.param(
            lambda h: history_features_at_creation(one_task(), h, groups=["x"]),
            id="training",
        ),
    ],
)
def test_unknown_group_is_rejected(build) -> None:
    with pytest.raises(ValueError, match="The 'groups' must be among .* Got \\['x'\\]"):
        build(one_history(T0, 1.0))


def test_feature_names_cover_groups_targets_and_stats() -> None:
    names = history_feature_names()
    assert len(names) == len(HISTORY_GROUPS) * len(TARGET_NAMES) * len(HISTORY_STATS)
    assert names[0] == "hist_trf_release_ramcount_last"
    assert RecentHistoryIndex.from_frame(one_history(T0, 1.0)).feature_names == names


def test_training_path_is_vectorised_on_200k_rows(seed: int) -> None:
    """Speed sanity, not a timed assertion: 200k tasks x 200k history rows."""
    tasks, history = make_frames(np.random.default_rng(seed), 200_000, 200_000)
    got = history_features_at_creation(tasks, history)
    assert got.shape == (200_000, len(history_feature_names()))
    assert got.index.equals(tasks.index)
    assert got["hist_user_ramcount_log1p_count"].max() > np.log1p(100)


def test_recency_rule_statistics_against_hand_computed_values():
    """p75, p95 and the largest used/requested ratio, as the rules read them.

    One user's jobs (labels known in the order j0, j2, j3, j1, ...): a job counts
    only once its label was known strictly before the submission.
    """
    submit = [0, 5, 20, 50, 100, 101]
    known = [10, 100, 30, 60, 200, 300]
    value = [10.0, 40.0, 6.0, 1.0, 1.0, 1.0]
    request = [20.0, 50.0, 30.0, 100.0, 100.0, 10.0]
    seconds = lambda xs: [T0 + pd.Timedelta(seconds=x) for x in xs]  # noqa: E731
    frame = pd.DataFrame(
        {
            "jeditaskid": range(6),
            "username": "u",
            "creationdate": seconds(submit),
            "labels_known_at": seconds(known),
            "walltime": value,
            "requested_walltime": request,
        }
    )
    got = history_features_at_creation(frame, frame, ("user",), ("walltime",))
    at = got.iloc[3]  # j0 and j2 known, j1 not yet (t=100)
    assert at["hist_user_walltime_log1p_count"] == pytest.approx(np.log1p(2))
    assert at["hist_user_walltime_last"] == 6.0
    assert at["hist_user_walltime_mean2"] == 8.0
    assert at["hist_user_walltime_max_ratio5"] == 0.5
    assert at["hist_user_walltime_p75"] == pytest.approx(9.0)
    assert at["hist_user_walltime_p95"] == pytest.approx(9.8)
    assert np.isnan(got.iloc[0]["hist_user_walltime_last"])
    # j1 is known at 100: not history at submit 100 (strict), history at 101
    assert got.iloc[4]["hist_user_walltime_log1p_count"] == pytest.approx(np.log1p(3))
    assert got.iloc[4]["hist_user_walltime_last"] == 1.0
    assert got.iloc[5]["hist_user_walltime_last"] == 40.0
