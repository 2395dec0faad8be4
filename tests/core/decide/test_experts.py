"""The expert combination: follow the leader per key, judged only on the past."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.decide.experts import (
    EXPERTS,
    CombinationParams,
    TrackRecord,
    combine,
    combine_at_snapshot,
    combine_at_snapshots,
    snapshot,
)

T0 = np.datetime64("2025-01-01T00:00:00", "ns")


def hours(*values: float) -> np.ndarray:
    return T0 + (np.asarray(values) * 3600e9).astype("timedelta64[ns]")


def classes(model: int, last2: int, p75: int = -1, p95: int = -1, ratio: int = -1):
    return [model, last2, p75, p95, ratio]


def record(user: str, n: int, model_right: bool, start: float = 0.0):
    """n finished tasks of ``user``: truth 1; the model or last2 is right."""
    right, wrong = 1, 0
    rows = [
        classes(right if model_right else wrong, wrong if model_right else right)
        for _ in range(n)
    ]
    known = hours(*(start + i for i in range(n)))
    return TrackRecord(
        np.array(rows), np.ones(n, dtype=int), np.array([user] * n), known
    )


def _joined(a: TrackRecord, b: TrackRecord) -> TrackRecord:
    return TrackRecord(
        *(
            np.concatenate([getattr(a, f), getattr(b, f)])
            for f in ("classes", "truth", "keys", "known_at")
        )
    )


def test_each_key_follows_its_own_best_expert():
    a = record("alice", 4, model_right=True)
    b = record("bob", 4, model_right=False)
    rec = _joined(a, b)
    queries = np.array([classes(2, 3), classes(2, 3)])
    out = combine(
        queries,
        np.array(["alice", "bob"], dtype=object),
        hours(10, 10),
        rec,
        CombinationParams(decay=0.8, min_record=2),
    )
    assert [EXPERTS[i] for i in out.leader] == ["model", "last2"]
    assert out.classes.tolist() == [2, 3]
    np.testing.assert_allclose(out.confidence, [1.0, 1.0])


def test_only_records_known_before_the_task_count():
    """The leakage rule: a label known at or after creation is not yet a record."""
    rec = record("alice", 4, model_right=False, start=5.0)  # known at 5..8 h
    query = np.array([classes(2, 3)])
    before = combine(query, np.array(["alice"], object), hours(5), rec,
                     CombinationParams(min_record=1))  # fmt: skip
    after = combine(query, np.array(["alice"], object), hours(8.5), rec,
                    CombinationParams(min_record=1))  # fmt: skip
    # At 5 h nothing is known yet (5 h itself is not "before"): follow the model.
    assert EXPERTS[before.leader[0]] == "model" and before.confidence[0] == 0.0
    assert EXPERTS[after.leader[0]] == "last2" and after.confidence[0] == 1.0


def test_a_thin_key_is_judged_by_everyones_record():
    many = record("alice", 6, model_right=False)
    few = record("bob", 1, model_right=True, start=6.0)
    rec = _joined(many, few)
    query = np.array([classes(2, 3)])
    thin = combine(query, np.array(["bob"], object), hours(20), rec,
                   CombinationParams(min_record=3))  # fmt: skip
    own = combine(query, np.array(["bob"], object), hours(20), rec,
                  CombinationParams(min_record=1))  # fmt: skip
    assert EXPERTS[thin.leader[0]] == "last2"  # everyone's record: last2 is better
    assert EXPERTS[own.leader[0]] == "model"  # bob's own record: the model


def test_an_abstaining_expert_is_never_followed():
    rec = record("alice", 3, model_right=False)
    query = np.array([classes(2, -1)])  # last2 has no value for this task
    out = combine(query, np.array(["alice"], object), hours(10), rec,
                  CombinationParams(min_record=1))  # fmt: skip
    assert EXPERTS[out.leader[0]] == "model" and out.classes[0] == 2


@pytest.mark.parametrize("balanced", [False, True], ids=["plain", "balanced"])
def test_snapshot_gives_the_combination_at_its_time(seed, balanced):
    rng = np.random.default_rng(seed)
    n = 300
    rec_classes = rng.integers(-1, 4, size=(n, len(EXPERTS)))
    truth = rng.integers(-1, 4, size=n)
    keys = rng.choice(np.array(["a", "b", "c", None], dtype=object), size=n)
    known = hours(*np.sort(rng.uniform(0, 100, size=n)))
    params = CombinationParams(decay=0.7, min_record=2, balanced=balanced)
    queries = rng.integers(0, 4, size=(50, len(EXPERTS)))
    q_keys = rng.choice(np.array(["a", "b", "c", "d"], dtype=object), size=50)
    at = hours(60)[0]
    record = TrackRecord(rec_classes, truth, keys, known)
    direct = combine(queries, q_keys, np.full(50, at), record, params)
    snap = snapshot(record, params, pd.Timestamp(at))
    served = combine_at_snapshot(queries, q_keys, snap, params)
    np.testing.assert_array_equal(served.classes, direct.classes)
    np.testing.assert_allclose(served.confidence, direct.confidence)
    assert len(set(direct.leader.tolist())) > 1  # the check can fail


def test_snapshots_of_several_targets_at_once_answer_each_alone(seed):
    """The served route judges all targets of its tasks in one pass."""
    rng = np.random.default_rng(seed)
    params = CombinationParams(decay=0.7, min_record=2)
    keys = rng.choice(np.array(["a", "b", "c", None], dtype=object), size=200)
    at = pd.Timestamp(hours(60)[0])
    snaps = []
    for _ in range(3):
        record = TrackRecord(
            rng.integers(-1, 4, size=(200, len(EXPERTS))),
            rng.integers(-1, 4, size=200),
            keys,
            hours(*np.sort(rng.uniform(0, 100, size=200))),
        )
        snaps.append(snapshot(record, params, at))
    queries = rng.integers(-1, 4, size=(40, 3, len(EXPERTS)))
    queries[:, :, 0] = rng.integers(0, 4, size=(40, 3))  # the model never abstains
    q_keys = rng.choice(np.array(["a", "b", "c", "d", None], dtype=object), size=40)
    together = combine_at_snapshots(queries, q_keys, snaps, params)
    for s, snap in enumerate(snaps):
        alone = combine_at_snapshot(queries[:, s], q_keys, snap, params)
        for field in ("classes", "leader", "confidence"):
            np.testing.assert_array_equal(
                getattr(together[s], field), getattr(alone, field)
            )


@pytest.mark.parametrize("min_record", [1, 2, 5])
def test_one_task_is_combined_as_in_a_batch_to_the_bit(seed, min_record):
    """The one-task route (plain floats) answers each task as the batch does:
    keys seen, unseen and missing, thin and thick records, abstaining experts."""
    rng = np.random.default_rng(seed + min_record)
    params = CombinationParams(decay=0.7, min_record=min_record)
    # "e" is rare: its record is thin (judged by everyone's) for a min_record > 1
    keys = rng.choice(
        np.array(["a", "b", "c", "e", None], dtype=object),
        size=300,
        p=[0.3, 0.3, 0.3, 0.01, 0.09],
    )
    at = pd.Timestamp(hours(60)[0])
    snaps = [
        snapshot(
            TrackRecord(
                rng.integers(-1, 4, size=(300, len(EXPERTS))),
                rng.integers(-1, 4, size=300),
                keys,
                hours(*np.sort(rng.uniform(0, 100, size=300))),
            ),
            params,
            at,
        )
        for _ in range(3)
    ]
    queries = rng.integers(-1, 4, size=(120, 3, len(EXPERTS)))
    queries[:, :, 0] = rng.integers(0, 4, size=(120, 3))
    q_keys = rng.choice(np.array(["a", "b", "c", "d", "e", None], dtype=object), 120)
    batch = combine_at_snapshots(queries, q_keys, snaps, params)
    assert len({int(v) for b in batch for v in b.leader}) > 2  # the check can fail
    thin = [0 < snap.counts[snap.keys["e"]] < min_record for snap in snaps]
    assert any(thin) == (min_record > 2), [
        snap.counts[snap.keys["e"]] for snap in snaps
    ]
    for i in range(len(q_keys)):
        one = combine_at_snapshots(queries[i : i + 1], q_keys[i : i + 1], snaps, params)
        for s in range(len(snaps)):
            for field in ("classes", "leader", "confidence"):
                got, want = getattr(one[s], field), getattr(batch[s], field)
                assert got.tolist() == want[i : i + 1].tolist(), (i, s, field)
                assert got.dtype == want.dtype, field


@pytest.mark.parametrize(
    ("params", "match"),
    [
        pytest.param({"decay": 0.0}, "'decay' field must be in", id="decay"),
        pytest.param({"key": "site"}, "'key' field must be one of", id="key"),
        pytest.param({"min_record": 0}, "'min_record' field must be", id="min"),
        pytest.param({"margin": -1.0}, "'margin' field must be", id="margin"),
    ],
)
def test_bad_parameters_are_refused(params, match):
    with pytest.raises(ValueError, match=match):
        CombinationParams(**params)


def test_parameters_round_trip_and_refuse_unknown_keys():
    params = CombinationParams(decay=0.5, key="user_transformation", min_record=3)
    assert CombinationParams.from_dict(params.to_dict()) == params
    with pytest.raises(ValueError, match="must be among"):
        CombinationParams.from_dict({"lambda": 0.5})


def test_balanced_record_follows_the_expert_right_on_the_rare_class():
    """Plain accuracy follows the expert right on the common class; the balanced
    record the one right on the rare class too (what macro-F1 rewards)."""
    # 8 tasks of class 0 (the model right on all, last2 on 6) then 2 of class 3
    # (last2 right, the model wrong), all alice's: plain accuracy 0.8 each (a
    # tie: the model), per-class recall 0.5 against 0.875.
    rows = [classes(0, 1)] * 2 + [classes(0, 0)] * 6 + [classes(1, 3)] * 2
    truth = np.array([0] * 8 + [3] * 2)
    rec = TrackRecord(
        np.array(rows), truth, np.array(["alice"] * 10), hours(*range(10))
    )
    query = np.array([classes(0, 3)])
    answers = {
        balanced: combine(
            query,
            np.array(["alice"], object),
            hours(20),
            rec,
            CombinationParams(decay=1.0, min_record=1, balanced=balanced),
        )  # fmt: skip
        for balanced in (False, True)
    }
    assert EXPERTS[answers[False].leader[0]] == "model"
    assert EXPERTS[answers[True].leader[0]] == "last2"


@pytest.mark.parametrize("decay", [0.5, 0.8, 1.0], ids=["0.5", "0.8", "1"])
def test_decayed_means_equal_pandas_ewm(seed, decay):
    """The per-group linear filter gives pandas' ewm(adjust=True) (or the mean)."""
    from panda_predictor.core.decide.experts import _ew_means

    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 7, size=200)
    values = rng.integers(0, 2, size=(200, 3)).astype(float)
    frame = pd.DataFrame(values).assign(code=codes).groupby("code")
    expected = (
        frame.ewm(alpha=1 - decay, adjust=True).mean()
        if decay < 1
        else frame.expanding().mean()
    )
    expected = expected.reset_index(level=0, drop=True).sort_index().to_numpy()
    np.testing.assert_allclose(_ew_means(codes, values, decay), expected)


@pytest.mark.parametrize("decay", [0.5, 0.8, 1.0], ids=["0.5", "0.8", "1"])
def test_decayed_means_filtered_in_blocks_equal_one_filter_per_group(seed, decay):
    """Groups filtered together (a block per power-of-two length, zero-padded)
    give each row the very bits of one filter run over its group alone."""
    from scipy.signal import lfilter

    from panda_predictor.core.decide.experts import _ew_means

    rng = np.random.default_rng(seed)
    # Groups of 1 to 70 rows: lengths at, below and above powers of two.
    codes = np.repeat(np.arange(70), np.arange(1, 71))
    rng.shuffle(codes)
    values = rng.random((codes.size, 4))
    expected = np.empty_like(values)
    for code in np.unique(codes):
        rows = np.flatnonzero(codes == code)
        ones = np.ones(rows.size)
        if decay < 1:
            sums = lfilter([1.0], [1.0, -decay], values[rows], axis=0)
            weights = lfilter([1.0], [1.0, -decay], ones)
        else:
            sums, weights = np.cumsum(values[rows], axis=0), np.cumsum(ones)
        expected[rows] = sums / weights[:, None]
    assert np.array_equal(_ew_means(codes, values, decay), expected)
