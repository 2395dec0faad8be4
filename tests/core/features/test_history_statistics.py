"""History statistics built once give every lookup the features of its own call.

A served history is looked up twice per step (the tasks predicted and the experts'
record tasks, :meth:`ServingHistory.statistics`); both must get the bits that a
separate build per lookup gave, also for keys the history never saw.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.errors import FeatureSchemaError
from panda_predictor.core.features import history as history_module
from panda_predictor.core.features.history import (
    HISTORY_GROUPS,
    HISTORY_STATS,
    HistoryStatistics,
    _request_values,
    _running_stats,
    _sorted_history,
    _target_values,
    group_key,
    latest_before,
    to_naive_ns,
)
from panda_predictor.core.features.pipeline import FeaturePipeline
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.combination import ServingHistory
from panda_predictor.serving.predictor import Predictor
from tests.core.features.test_history import make_frames


def separate_build(tasks: pd.DataFrame, history: pd.DataFrame) -> pd.DataFrame:
    """The features as one call built them before the statistics were kept: the
    history's and the tasks' keys factorized together, the statistics rebuilt."""
    hist = _sorted_history(history, HISTORY_GROUPS, TARGET_NAMES)
    created = to_naive_ns(tasks["creationdate"], "creationdate")
    out: dict[str, np.ndarray] = {}
    for group, columns in HISTORY_GROUPS.items():
        task_key = group_key(tasks, columns).reset_index(drop=True)
        codes, _ = pd.factorize(pd.concat([group_key(hist, columns), task_key]))
        for target in TARGET_NAMES:
            block = np.full((len(tasks), len(HISTORY_STATS)), np.nan)
            block[created.notna().to_numpy(), 2] = 0.0
            stats = _running_stats(
                codes[: len(hist)],
                hist["_known_at"].to_numpy(),
                _target_values(hist, target),
                _request_values(hist, target),
            )
            rows, values = latest_before(
                codes[len(hist) :],
                created.to_numpy(),
                stats,
                HISTORY_STATS,
                "log1p_count",
            )
            block[rows] = values
            for i, stat in enumerate(HISTORY_STATS):
                out[f"hist_{group}_{target}_{stat}"] = block[:, i]
    return pd.DataFrame(out, index=tasks.index)


def strangers(tasks: pd.DataFrame) -> pd.DataFrame:
    """Return ``tasks`` with keys the history never saw and one without a time."""
    odd = tasks.head(4).copy()
    odd["username"] = ["nobody-1", "nobody-2", None, "nobody-1"]
    odd["transpath"] = ["New_tf.py", None, "New_tf.py", "Reco_tf.py"]
    odd["creationdate"] = odd["creationdate"].where(odd.index != odd.index[1])
    odd.index = odd.index + 1_000_000
    return pd.concat([tasks, odd])


def test_one_build_gives_each_lookup_the_bits_of_a_separate_build(seed: int) -> None:
    tasks, history = make_frames(np.random.default_rng(seed), 400, 4000)
    tasks = strangers(tasks)
    # The record tasks of a served history: its own rows, each as of its creation.
    records = history.assign(
        creationdate=history["labels_known_at"] - pd.Timedelta(hours=6)
    )
    statistics = HistoryStatistics(history)
    for lookup in (tasks, records, tasks):
        got = statistics.at_creation(lookup)
        expected = separate_build(lookup, history)
        pd.testing.assert_frame_equal(got, expected, check_exact=True)
    # Not vacuous: keys seen before, and strangers that saw nothing.
    got = statistics.at_creation(tasks)
    assert got["hist_user_ramcount_last"].notna().mean() > 0.5
    stranger = got.loc[tasks.index[-4:]]
    assert (stranger["hist_user_ramcount_log1p_count"].fillna(-1) <= 0).all()
    assert stranger["hist_user_ramcount_last"].isna().all()


def test_a_single_lookup_keeps_no_table_and_gives_the_same_bits(seed: int) -> None:
    """Training's one lookup (``keep=False``) holds no running table afterwards,
    where the kept statistics hold one per (group, target), with the same bits."""
    tasks, history = make_frames(np.random.default_rng(seed), 300, 3000)
    once = HistoryStatistics(history, keep=False)
    kept = HistoryStatistics(history)
    pd.testing.assert_frame_equal(
        once.at_creation(tasks), kept.at_creation(tasks), check_exact=True
    )
    assert once._tables == {}
    assert len(kept._tables) == len(HISTORY_GROUPS) * len(TARGET_NAMES)


def test_a_pipeline_takes_the_statistics_as_its_history(
    trained_bundle_dir, labelled_history
) -> None:
    features: FeaturePipeline = load_bundle(trained_bundle_dir).features
    frame = labelled_history.history
    tasks = labelled_history.tasks.tail(300)
    with_frame = features.transform(tasks, frame)
    with_statistics = features.transform(tasks, features.statistics(frame))
    pd.testing.assert_frame_equal(with_statistics, with_frame, check_exact=True)
    assert with_frame["hist_user_walltime_last"].notna().mean() > 0.5


def test_statistics_without_a_feature_are_refused(
    trained_bundle_dir, labelled_history
) -> None:
    features: FeaturePipeline = load_bundle(trained_bundle_dir).features
    narrow = HistoryStatistics(labelled_history.history, groups=("user",))
    with pytest.raises(FeatureSchemaError, match="HistoryStatistics without"):
        features.transform(labelled_history.tasks.tail(3), narrow)


def test_a_served_history_builds_its_statistics_once(
    trained_bundle_dir, labelled_history, monkeypatch
) -> None:
    """Predicting with a frame judged per task reads the statistics for the tasks
    and for the experts' records: one build of each (group, target), not two."""
    bundle = load_bundle(trained_bundle_dir)
    assert bundle.combination is not None  # the records are read, too
    builds: list[int] = []

    def counted(*args, **kwargs):
        builds.append(1)
        return _running_stats(*args, **kwargs)

    monkeypatch.setattr(history_module, "_running_stats", counted)
    frame = labelled_history.history
    tasks = labelled_history.tasks.tail(50)
    served = ServingHistory(frame)
    predictor = Predictor(bundle, "panda-predictor", "1")
    first = predictor.classified(tasks, served)
    per_build = len(bundle.features.history_groups) * sum(
        t in frame.columns for t in bundle.features.targets
    )
    assert len(builds) == per_build
    again = predictor.classified(tasks, served)
    assert len(builds) == per_build
    # And the same answer as a history that builds everything anew.
    fresh = predictor.classified(tasks, ServingHistory(frame))
    for target in first.chosen:
        np.testing.assert_array_equal(first.chosen[target], fresh.chosen[target])
        np.testing.assert_array_equal(again.proba[target], fresh.proba[target])
