"""Never worse than the rules: follow, per key, whichever expert has been right lately.

The experts for one target are the model's class and the field's recency rules, each
turned into a class with the target's bins
(:mod:`panda_predictor.core.decide.recency_rules`):

* ``last2``: the mean of the user's last two values (Tsafrir et al.);
* ``key_p75`` / ``key_p95``: the 75th / 95th percentile of the last values of the
  user's same transformation (the user's, where that key has none), plus a margin;
* ``ratio``: the largest of the user's last five used/requested ratios times this
  task's request (only where the requester gave a value).

For every finished task we know what each expert said at its submission and what
the truth was. Per *key* (by default the user: a user's tasks are the ones whose
history the rules read, and a model that is good in general can still be wrong for
one user's workflow) we keep an exponentially weighted accuracy of each expert over
that key's finished tasks, newest weighted most (``decay`` per task). A task follows
the expert with the best such accuracy, judged strictly on tasks whose labels were
known *before* the task was created: the same leakage rule as the history features.
A key with fewer than ``min_record`` finished tasks is judged by the record of all
keys. The leader's weighted accuracy is the prediction's confidence: where no expert
has been right often enough for the key, the policy keeps the scouts.

Pure numpy/pandas: the record and the queries come from the caller (the predictor
builds both from the labelled history, the same way for the hook, the service and
the benchmark).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.decide import row_math
from panda_predictor.core.features.history import latest_before

#: The experts, in tie-break order (the model wins a tie).
EXPERTS: tuple[str, ...] = ("model", "last2", "key_p75", "key_p95", "ratio")
#: Keys a record may be kept per (history groups of :mod:`..history`).
RECORD_KEYS: tuple[str, ...] = ("user", "user_transformation")
#: Decay of the record of all keys (a longer memory than one key's).
GLOBAL_DECAY = 0.98


@dataclass(frozen=True)
class CombinationParams:
    """How the experts are combined (chosen per deployment at training time).

    Parameters: ``decay`` weighs a key's finished tasks (1: all equal, smaller:
    the newest count more); ``key`` the history group whose tasks share a record;
    ``min_record`` the finished tasks a key needs before its own record decides;
    ``margin`` the relative margin added to the percentile rules; ``balanced``
    scores an expert by its records per true class, averaged (its recent recall
    per class, as macro-F1 weighs the classes), instead of its plain accuracy.
    """

    decay: float = 0.8
    key: str = "user"
    min_record: int = 2
    margin: float = 0.10
    balanced: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(
                f"The 'decay' field must be in (0, 1]. Got {self.decay!r} instead."
            )
        if self.key not in RECORD_KEYS:
            raise ValueError(
                f"The 'key' field must be one of {list(RECORD_KEYS)}. "
                f"Got {self.key!r} instead."
            )
        if isinstance(self.min_record, bool) or not (
            isinstance(self.min_record, int) and self.min_record >= 1
        ):
            raise ValueError(
                "The 'min_record' field must be an integer >= 1. "
                f"Got {self.min_record!r} instead."
            )
        if not self.margin >= 0.0:
            raise ValueError(
                f"The 'margin' field must be >= 0. Got {self.margin!r} instead."
            )

    def to_dict(self) -> dict[str, Any]:
        """Return the parameters as a JSON-serialisable dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CombinationParams:
        """Rebuild parameters from :meth:`to_dict` (unknown keys are refused)."""
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"The combination parameters must be among "
                f"{sorted(cls.__dataclass_fields__)}. Got {unknown} instead."
            )
        return cls(**data)


def _ew_means(codes: np.ndarray, values: np.ndarray, decay: float) -> np.ndarray:
    """Return per row the decayed mean of its group's values up to and with it.

    ``sum(decay^age * v) / sum(decay^age)`` over the group's rows so far (rows in
    time order within each group): pandas' ``ewm(adjust=True)``, computed with a
    linear filter along each group instead of pandas' per-group machinery.

    The groups are filtered together, a block per power-of-two length: each
    group is padded with zeros to its block's width, and a causal filter never
    reads past a row, so every row gets the bits one filter per group would give
    it, at a few calls instead of one per key (a serving history holds
    thousands of keys, and the track records are rebuilt whenever it moves).
    """
    # scipy.signal costs ~2 s to import: only the history path that needs it pays.
    from scipy.signal import lfilter

    order = np.argsort(codes, kind="stable")  # stable: time order within a group
    sorted_codes, sorted_values = codes[order], values[order]
    bounds = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1], True])
    starts, lengths = bounds[:-1], np.diff(bounds)
    out = np.empty_like(sorted_values)
    if not lengths.size:
        return out
    widths = 1 << np.ceil(np.log2(lengths)).astype(np.int64)
    widest = int(widths.max())
    if decay < 1.0:
        weights = lfilter([1.0], [1.0, -decay], np.ones(widest))
    else:
        weights = np.arange(1.0, widest + 1.0)
    for width in np.unique(widths):
        group = np.flatnonzero(widths == width)
        offsets = np.arange(width)
        inside = offsets[None, :] < lengths[group, None]
        rows = np.where(inside, starts[group, None] + offsets[None, :], 0)
        block = np.where(inside[:, :, None], sorted_values[rows], 0.0)
        if decay < 1.0:
            sums = lfilter([1.0], [1.0, -decay], block, axis=1)
        else:
            sums = np.cumsum(block, axis=1)
        out[rows[inside]] = (sums / weights[:width, None])[inside]
    result = np.empty_like(out)
    result[order] = out
    return result


def _ew_record(
    codes: np.ndarray, known_at: np.ndarray, correct: np.ndarray, decay: float
) -> pd.DataFrame:
    """Return, after each finished task, its key's weighted accuracy per expert."""
    codes = np.asarray(codes, dtype=np.int64)
    frame = pd.DataFrame(
        _ew_means(codes, correct.astype(np.float64).reshape(len(codes), -1), decay)
        if len(codes)
        else np.empty((0, len(EXPERTS))),
        columns=list(EXPERTS),
    )
    frame.insert(0, "code", codes)
    frame.insert(1, "_known_at", known_at)
    frame["_n"] = frame.groupby("code", sort=False).cumcount().to_numpy() + 1.0
    return frame


def _class_parts(truth: np.ndarray, balanced: bool) -> list[np.ndarray]:
    """Return the record's row masks scored separately: all, or one per class.

    Balanced, an expert's score is the mean of its per-class records: its
    recent recall averaged over the classes, which is what macro-F1 rewards,
    instead of its accuracy, which rewards getting the common class right.
    """
    if not balanced or truth.size == 0:
        return [np.ones(truth.size, dtype=bool)]
    return [truth == c for c in np.unique(truth)]


def _mean_of_parts(parts: list[np.ndarray]) -> np.ndarray:
    """Return the element-wise mean of the parts, ignoring NaN (NaN if all are)."""
    stack = np.stack(parts)
    present = ~np.isnan(stack)
    total = np.where(present, stack, 0.0).sum(axis=0)
    count = present.sum(axis=0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _as_of(
    record: pd.DataFrame, codes: np.ndarray, times: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return each query's key record strictly before its time: scores and count."""
    n = codes.size
    scores = np.full((n, len(EXPERTS)), np.nan)
    counts = np.zeros(n)
    if len(record) == 0:
        return scores, counts
    columns = [*EXPERTS, "_n"]
    rows, values = latest_before(codes, times, record, columns, "_n")
    scores[rows], counts[rows] = values[:, :-1], values[:, -1]
    return scores, counts


@dataclass(frozen=True)
class TrackRecord:
    """Finished tasks of one target: what each expert said at their submission.

    ``classes`` (m, E) from ``recency_rules.expert_classes``; ``truth`` the true
    class (-1: unknown, skipped); ``keys`` their record keys (None: no key);
    ``known_at`` when their labels became known.
    """

    classes: np.ndarray
    truth: np.ndarray
    keys: np.ndarray
    known_at: np.ndarray

    def finished(self, before: np.datetime64 | None = None) -> _Finished:
        """Return the tasks with a known truth (known strictly ``before``), oldest
        label first, with each expert's correctness."""
        times = np.asarray(self.known_at, dtype="datetime64[ns]")
        keep = self.truth >= 0
        if before is not None:
            keep &= times < before
        order = np.argsort(times[keep], kind="stable")
        truth = self.truth[keep][order]
        return _Finished(
            correct=self.classes[keep][order] == truth[:, None],
            truth=truth,
            keys=np.asarray(self.keys, dtype=object)[keep][order],
            known_at=times[keep][order],
        )


@dataclass(frozen=True)
class _Finished:
    """A track record's finished tasks in label order (see TrackRecord.finished)."""

    correct: np.ndarray
    truth: np.ndarray
    keys: np.ndarray
    known_at: np.ndarray


@dataclass(frozen=True)
class Combined:
    """The combination's answer per task: class, followed expert and its accuracy."""

    classes: np.ndarray
    leader: np.ndarray
    confidence: np.ndarray


def combine(
    query_classes: np.ndarray,
    query_keys: np.ndarray,
    query_times: np.ndarray,
    record: TrackRecord,
    params: CombinationParams,
) -> Combined:
    """Follow, per task, the expert with the best recent record of its key.

    Parameters: ``query_classes`` (n, E) from ``recency_rules.expert_classes``;
    ``query_keys`` (n,) key strings or None; ``query_times`` (n,) creation times
    (datetime64); ``record`` the finished tasks. Returns the followed class and
    the leader's weighted accuracy, the confidence (0 when nothing has been
    recorded yet).
    """
    scores = record_scores(query_keys, query_times, record, params)
    return follow(query_classes, scores, params)


@dataclass(frozen=True)
class RecordScores:
    """Per task, its key's record (scores, count) and the record of all keys."""

    key_scores: np.ndarray
    key_counts: np.ndarray
    all_scores: np.ndarray


def record_scores(
    query_keys: np.ndarray,
    query_times: np.ndarray,
    record: TrackRecord,
    params: CombinationParams,
) -> RecordScores:
    """Return each task's records as of its creation (see :func:`combine`).

    Does not depend on ``params.min_record`` (only :func:`follow` does), so a
    caller trying several can compute this once.
    """
    done = record.finished()
    codes, _ = pd.factorize(
        pd.concat([pd.Series(done.keys), pd.Series(query_keys, dtype=object)])
    )
    rec_codes, q_codes = codes[: len(done.keys)], codes[len(done.keys) :]
    times = np.asarray(query_times, dtype="datetime64[ns]")
    everyone = np.where(np.isnat(times), -1, 0)
    key_parts, count_parts, all_parts = [], [], []
    for part in _class_parts(done.truth, params.balanced):
        per_key = _ew_record(
            rec_codes[part], done.known_at[part], done.correct[part], params.decay
        )
        scores, counts = _as_of(per_key, q_codes, times)
        key_parts.append(scores)
        count_parts.append(counts)
        zeros = np.zeros(int(part.sum()), dtype=np.int64)
        overall = _ew_record(
            zeros, done.known_at[part], done.correct[part], GLOBAL_DECAY
        )
        all_parts.append(_as_of(overall, everyone, times)[0])
    key_scores = _mean_of_parts(key_parts)
    key_counts = np.sum(count_parts, axis=0)
    all_scores = _mean_of_parts(all_parts)
    return RecordScores(key_scores, key_counts, all_scores)


def follow(
    query_classes: np.ndarray, records: RecordScores, params: CombinationParams
) -> Combined:
    """Pick each task's leader from its key's record (or everyone's, if thin)."""
    use_key = records.key_counts >= params.min_record
    scores = np.where(use_key[:, None], records.key_scores, records.all_scores)
    # No record at all: follow the model (the first expert), with no confidence.
    scores = np.where(np.isnan(scores), -1.0, scores)
    scores[:, 0] = np.maximum(scores[:, 0], -0.5)
    scores = np.where(query_classes >= 0, scores, -np.inf)
    leader = np.argmax(scores, axis=1)
    rows = np.arange(leader.size)
    classes = query_classes[rows, leader]
    confidence = np.clip(scores[rows, leader], 0.0, 1.0)
    return Combined(classes, leader, confidence)


@dataclass(frozen=True)
class ExpertSnapshot:
    """Every key's record as of one time: what serving looks up per task.

    ``keys`` maps a key to its row of ``scores`` (weighted accuracy per expert)
    and ``counts`` (finished tasks); ``overall`` is the record of all keys.
    :func:`combine_at_snapshot` with it gives what :func:`combine` gives for
    tasks created at ``as_of``.
    """

    keys: dict[str, int]
    scores: np.ndarray
    counts: np.ndarray
    overall: np.ndarray
    as_of: np.datetime64


def snapshot(
    record: TrackRecord, params: CombinationParams, as_of: Any
) -> ExpertSnapshot:
    """Return the records of every key over the tasks known strictly before as_of."""
    cutoff = np.datetime64(pd.Timestamp(as_of), "ns")
    done = record.finished(before=cutoff)
    codes, uniques = pd.factorize(pd.Series(done.keys))
    score_parts, count_parts, overall_parts = [], [], []
    for part in _class_parts(done.truth, params.balanced):
        per_key = _ew_record(
            codes[part], done.known_at[part], done.correct[part], params.decay
        )
        latest = per_key[per_key["code"] >= 0].drop_duplicates("code", keep="last")
        rows = latest["code"].to_numpy()
        scores = np.full((len(uniques), len(EXPERTS)), np.nan)
        counts = np.zeros(len(uniques))
        scores[rows] = latest[list(EXPERTS)].to_numpy()
        counts[rows] = latest["_n"].to_numpy()
        score_parts.append(scores)
        count_parts.append(counts)
        zeros = np.zeros(int(part.sum()), np.int64)
        every = _ew_record(zeros, done.known_at[part], done.correct[part], GLOBAL_DECAY)
        overall_parts.append(
            every[list(EXPERTS)].to_numpy()[-1]
            if len(every)
            else np.full(len(EXPERTS), np.nan)
        )
    scores = _mean_of_parts(score_parts)
    counts = np.sum(count_parts, axis=0)
    overall = _mean_of_parts(overall_parts)
    keys = {str(k): i for i, k in enumerate(uniques)}
    return ExpertSnapshot(keys, scores, counts, overall, cutoff)


def combine_at_snapshot(
    query_classes: np.ndarray,
    query_keys: np.ndarray,
    snap: ExpertSnapshot,
    params: CombinationParams,
) -> Combined:
    """Return :func:`combine`'s answer for tasks created at the snapshot's time."""
    (answer,) = combine_at_snapshots(
        query_classes[:, None, :], query_keys, [snap], params
    )
    return answer


def combine_at_snapshots(
    query_classes: np.ndarray,
    query_keys: np.ndarray,
    snaps: Sequence[ExpertSnapshot],
    params: CombinationParams,
) -> list[Combined]:
    """Return :func:`combine_at_snapshot` for several targets' snapshots at once.

    ``query_classes`` is (n, len(snaps), E), one target's
    ``recency_rules.expert_classes`` per snapshot. :func:`follow` judges each
    (task, target) row alone, so all of them go through it in one call.
    """
    n, width = len(query_keys), len(EXPERTS)
    if n == 1:
        return _combine_one(query_classes[0], query_keys[0], snaps, params)
    key_scores = np.full((n, len(snaps), width), np.nan)
    key_counts = np.zeros((n, len(snaps)))
    keys = query_keys.tolist() if isinstance(query_keys, np.ndarray) else query_keys
    for s, snap in enumerate(snaps):
        # Each task's row of the snapshot (-1: no record), then one fancy index.
        rows = np.fromiter(
            (snap.keys.get(k, -1) if isinstance(k, str) else -1 for k in keys),
            dtype=np.intp,
            count=n,
        )
        found = np.flatnonzero(rows >= 0)
        key_scores[found, s] = snap.scores[rows[found]]
        key_counts[found, s] = snap.counts[rows[found]]
    all_scores = np.empty_like(key_scores)
    all_scores[:] = np.array([snap.overall for snap in snaps])
    records = RecordScores(
        key_scores.reshape(-1, width),
        key_counts.reshape(-1),
        all_scores.reshape(-1, width),
    )
    answer = follow(query_classes.reshape(-1, width), records, params)
    shape = (n, len(snaps))
    classes, leader, confidence = (
        a.reshape(shape) for a in (answer.classes, answer.leader, answer.confidence)
    )
    return [
        Combined(classes[:, s], leader[:, s], confidence[:, s])
        for s in range(len(snaps))
    ]


def _combine_one(
    query_classes: np.ndarray,
    key: Any,
    snaps: Sequence[ExpertSnapshot],
    params: CombinationParams,
) -> list[Combined]:
    """Return :func:`combine_at_snapshots` of one task (``query_classes``: its
    (len(snaps), E) classes): :func:`follow`'s steps on plain floats, one snapshot
    (target) after another."""
    out = []
    for snap, classes in zip(snaps, query_classes.tolist(), strict=True):
        row = snap.keys.get(key) if isinstance(key, str) else None
        count = 0.0 if row is None else float(snap.counts[row])
        if count >= params.min_record:
            scores = (
                [math.nan] * len(classes) if row is None else snap.scores[row].tolist()
            )
        else:
            scores = snap.overall.tolist()
        scores = [-1.0 if math.isnan(v) else v for v in scores]
        scores[0] = max(scores[0], -0.5)
        scores = [
            v if c >= 0 else -math.inf for v, c in zip(scores, classes, strict=True)
        ]
        leader = row_math.argmax(scores)
        out.append(
            Combined(
                np.array([classes[leader]], dtype=query_classes.dtype),
                np.array([leader], dtype=np.intp),
                np.array([min(max(scores[leader], 0.0), 1.0)]),
            )
        )
    return out
