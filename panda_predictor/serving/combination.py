"""Combine a bundle's model with the recency rules, from the labelled history.

The model's track record is rebuilt from the history each time, never stored: for
every task of the history created since the bundle's ``record_start`` (tasks the
model did not fit on) the bundle predicts its class as of the task's creation, and
the recency rules' classes come from the same history features. So the hook, the
service and the benchmark, given the same history, follow the same experts (see
:mod:`panda_predictor.core.decide.experts`).

Two forms of the same history:

* a labelled history *frame*: every task is judged as of its own creation (the
  hook and the benchmark);
* a :class:`ServingHistory`: the frame indexed once as of one time, so that one
  task costs dict lookups (the HTTP service and, through it, the JEDI refiner).
  For a task created at that time both give the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from panda_predictor.core.decide.experts import (
    EXPERTS,
    Combined,
    ExpertSnapshot,
    TrackRecord,
    combine_at_snapshots,
    snapshot,
)
from panda_predictor.core.decide.experts import (
    combine as combine_experts,
)
from panda_predictor.core.decide.recency_rules import (
    FeatureColumns,
    expert_classes,
    rule_table,
)
from panda_predictor.core.features.history import (
    HISTORY_GROUPS,
    HistoryStatistics,
    RecentHistoryIndex,
    group_key,
    to_naive_ns,
)
from panda_predictor.core.features.pipeline import TASK_COLUMNS, FeaturePipeline
from panda_predictor.core.features.task_features import REQUEST_COLUMNS
from panda_predictor.core.identity_cache import cached_by_identity

if TYPE_CHECKING:
    from panda_predictor.serving.bundle import Bundle


def _task_frame(history: pd.DataFrame) -> pd.DataFrame:
    columns = [c for c in (*TASK_COLUMNS, *REQUEST_COLUMNS) if c in history.columns]
    return history[columns]


def _classes(bundle: Bundle, features: pd.DataFrame) -> dict[str, np.ndarray]:
    """Return the model's chosen class per target (with its tail rule)."""
    return {
        target: bundle.tail_rules[target].predict(model.predict_proba(features))
        for target, model in bundle.models.items()
    }


def track_records(
    bundle: Bundle,
    history: pd.DataFrame,
    statistics: HistoryStatistics | None = None,
) -> dict[str, TrackRecord]:
    """Return each target's record over the history tasks since ``record_start``.

    ``history`` is a labelled history frame that also holds the task columns
    (:data:`~panda_predictor.core.features.pipeline.TASK_COLUMNS`);
    ``statistics``, if given, its running statistics for ``bundle``'s features
    (:meth:`ServingHistory.statistics`), so that they are not built again.
    """
    params = bundle.combination
    assert params is not None
    missing = [c for c in TASK_COLUMNS if c not in history.columns]
    if missing:
        raise ValueError(
            "The history must hold the task columns to rebuild the model's track "
            f"record. Got one without {missing} instead."
        )
    created = to_naive_ns(history["creationdate"], "creationdate").to_numpy()
    start = np.datetime64(pd.Timestamp(bundle.record_start or "1970-01-01"), "ns")
    known_at = to_naive_ns(history["labels_known_at"], "labels_known_at").to_numpy()
    rows = np.flatnonzero((created >= start) & ~np.isnat(known_at))
    records = {}
    tasks = _task_frame(history).iloc[rows]
    if len(rows):
        X = bundle.features.transform(
            tasks, history if statistics is None else statistics
        )
        classes = task_experts(bundle, X, _classes(bundle, X))
    keys = group_key(history.iloc[rows], HISTORY_GROUPS[params.key]).to_numpy(object)
    for i, target in enumerate(bundle.models):
        if not len(rows) or target not in history.columns:
            empty = np.empty((0, len(EXPERTS)), dtype=np.int64)
            records[target] = TrackRecord(
                empty, np.empty(0, np.int64), np.empty(0, object), known_at[:0]
            )
            continue
        truth = bundle.bins[target].assign(history[target].to_numpy(dtype=float)[rows])
        records[target] = TrackRecord(classes[:, i], truth, keys, known_at[rows])
    return records


def task_experts(
    bundle: Bundle, X: FeatureColumns, chosen: Mapping[str, np.ndarray]
) -> np.ndarray:
    """Return what each expert says for each task and target: an (n, targets, E)
    class matrix (-1 where an expert abstains), targets in ``chosen``'s order.

    The one place the experts' classes are built: the track record, both forms of
    the combination and every route read them from here.

    :param X: the tasks' feature columns (history features and requests).
    :param chosen: per target, the model's class of each task (with its tail rule).
    """
    params = bundle.combination
    assert params is not None
    targets = list(chosen)
    # All targets at once: one task's serving pays each array operation once.
    rules = rule_table(X, targets, params.margin)
    if rules.shape[0] == 1:
        # One task: the classes of its rules' values, target by target, on plain
        # floats (the same classes as expert_classes gives the batch).
        return np.array(
            [
                [
                    [
                        int(chosen[t][0]),
                        *bundle.bins[t].assign_values(rules[0, i].tolist()),
                    ]
                    for i, t in enumerate(targets)
                ]
            ],
            dtype=np.int64,
        )
    return np.stack(
        [
            expert_classes(chosen[t], rules[:, i], bundle.bins[t].assign)
            for i, t in enumerate(targets)
        ],
        axis=1,
    )


def combine(
    bundle: Bundle,
    tasks: pd.DataFrame,
    X: pd.DataFrame,
    chosen: dict[str, np.ndarray],
    records: dict[str, TrackRecord],
) -> dict[str, Combined]:
    """Return, per target, the class of the expert each task follows and why,
    each task judged on the records known before its creation."""
    params = bundle.combination
    assert params is not None
    keys = group_key(tasks, HISTORY_GROUPS[params.key]).to_numpy(object)
    times = to_naive_ns(tasks["creationdate"], "creationdate").to_numpy()
    classes = task_experts(bundle, X, chosen)
    return {
        target: combine_experts(classes[:, i], keys, times, records[target], params)
        for i, target in enumerate(chosen)
    }


class ServingHistory:
    """The one history type every prediction takes: a labelled history frame.

    Two ways to read it, with the same answer for a task created at ``as_of``:

    * ``as_of=None``: every task is judged as of its own creation (history
      features and expert records from labels known before it): the hook's
      backlog and the benchmark's periods;
    * ``as_of`` a time: the frame is indexed once as of then, so that one task
      costs dict lookups (the HTTP service and the JEDI refiner's client).

    The index, the experts' records (per bundle: a new champion has its own track
    record) and the snapshots as of ``as_of`` are built on first use.
    """

    def __init__(self, frame: pd.DataFrame, as_of: object = None) -> None:
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(
                "The 'frame' of a ServingHistory must be a labelled history "
                f"DataFrame. Got {type(frame).__name__} instead."
            )
        self.frame = frame
        self.as_of = None if as_of is None else pd.Timestamp(as_of)
        self._index: RecentHistoryIndex | None = None

    @property
    def index(self) -> RecentHistoryIndex:
        """Return the history-feature index as of ``as_of`` (built once)."""
        if self.as_of is None:
            raise ValueError(
                "A ServingHistory without 'as_of' judges each task as of its own "
                "creation and has no index as of one time."
            )
        if self._index is None:
            self._index = RecentHistoryIndex.from_frame(self.frame, as_of=self.as_of)
        return self._index

    def records(self, bundle: Bundle) -> dict[str, TrackRecord]:
        """Return each target's track record of ``bundle`` over the frame (kept for
        the last bundle asked: a new champion has its own track record)."""
        return cached_by_identity(
            self,
            "_records",
            (bundle,),
            lambda: track_records(bundle, self.frame, self.statistics(bundle.features)),
        )

    def statistics(self, features: FeaturePipeline) -> HistoryStatistics:
        """Return the frame's running history statistics for the key groups and
        targets of ``features`` (kept for the last pipeline asked).

        A frame judged per task is read twice with the same statistics: for the
        tasks predicted and for the experts' record tasks (:meth:`records`).
        Sorting the frame and running the rolling kernels is most of each read,
        so it is done once.
        """
        return cached_by_identity(
            self, "_statistics", (features,), lambda: features.statistics(self.frame)
        )

    def snapshots(self, bundle: Bundle) -> dict[str, ExpertSnapshot]:
        """Return each target's expert records of ``bundle`` as of ``as_of`` (kept
        for the last bundle asked)."""

        def build() -> dict[str, ExpertSnapshot]:
            params = bundle.combination
            assert params is not None and self.as_of is not None
            return {
                target: snapshot(record, params, self.as_of)
                for target, record in self.records(bundle).items()
            }

        return cached_by_identity(self, "_snapshots", (bundle,), build)


def as_history(history: object) -> ServingHistory | None:
    """Return ``history`` as the one history type (a frame is judged per task).

    A bare :class:`~panda_predictor.core.features.history.RecentHistoryIndex` is
    refused: it has no labels, so the expert combination could not run on it, and
    whether it runs must not depend on what a caller happened to pass.
    """
    if history is None or isinstance(history, ServingHistory):
        return history
    if isinstance(history, pd.DataFrame):
        return ServingHistory(history)
    raise TypeError(
        "The 'history' field must be a labelled history frame, a ServingHistory "
        f"or None. Got {type(history).__name__} instead (an index alone has no "
        "labels for the expert combination: wrap its frame in ServingHistory)."
    )


def combine_served(
    bundle: Bundle,
    keys: np.ndarray,
    X: FeatureColumns,
    chosen: dict[str, np.ndarray],
    history: ServingHistory,
) -> dict[str, Combined]:
    """Return :func:`combine`'s answer for tasks created at ``history.as_of``."""
    params = bundle.combination
    assert params is not None
    snaps = history.snapshots(bundle)
    targets = list(chosen)
    classes = task_experts(bundle, X, chosen)
    answers = combine_at_snapshots(classes, keys, [snaps[t] for t in targets], params)
    return dict(zip(targets, answers, strict=True))
