"""Turn task rows into :class:`TaskPrediction` records with a loaded bundle.

The same code serves the database hook, the HTTP service, the JEDI refiner plugin and
``panda-predictor predict``: features -> per-target probabilities (the models' fast
paths) -> tail decision rule -> confidence -> the applied / kept_scouts policy.

Three routes give the same predictions: the DataFrame route (vectorised pandas, best
for large batches), :meth:`Predictor.predict_table` (the same, returned as columns
instead of one record per task, for bulk callers) and the records route
(:meth:`Predictor.predict_records`: plain dict lookups into a float32 code matrix,
for one task or a few; ~1 ms instead of ~20 ms for one task). :meth:`Predictor.predict`
picks the records route for frames of up to :data:`FAST_PATH_MAX_ROWS` rows.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.calibration import served_mixture
from panda_predictor.core.experts import EXPERTS
from panda_predictor.core.features import TASK_COLUMNS
from panda_predictor.core.history import (
    HISTORY_GROUPS,
    RecentHistoryIndex,
    group_key,
    record_key,
    split_transhome,
    split_transhome_value,
    text_value,
)
from panda_predictor.core.scout_policy import (
    NO_TRANSFORMATION,
    TaskDecision,
    in_training_domain,
)
from panda_predictor.core.tail_rule import confidence
from panda_predictor.core.task_features import REQUEST_COLUMNS
from panda_predictor.core.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.core.units import from_panda
from panda_predictor.serving.bundle import Bundle
from panda_predictor.serving.combination import (
    ServingHistory,
    combine,
    combine_served,
    track_records,
)

#: Frames up to this many rows take the records route in :meth:`Predictor.predict`;
#: beyond it vectorised pandas is faster per task.
FAST_PATH_MAX_ROWS = 32

#: Code matrix -> probabilities per target.
MatrixFn = Callable[[np.ndarray], dict[str, np.ndarray]]


#: Digits kept of each stored probability (``round``'s second argument, per class).
_FOURS = itertools.repeat(4)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a batch builds its records.

    A 100k-task batch creates half a million small objects that hold no cycles;
    without the pause the collector re-scans them again and again, which doubles
    the time spent building them. Reference counting still frees memory.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass
class Classified:
    """What :meth:`Predictor.classified` computed for a batch of tasks.

    ``features`` the model inputs (None on the records route unless the
    combination needed them); per target ``proba``, ``model_chosen`` (the
    model with its tail rule), ``chosen`` (after the expert combination, when the
    bundle has one), ``followed`` (index into
    :data:`~panda_predictor.core.experts.EXPERTS`) and ``record_accuracy`` (the
    followed expert's recent weighted accuracy; both empty without combination),
    ``distribution`` (the calibrated served distribution, n x K, see
    :meth:`Predictor.distribution_of`) and ``confidence`` (P(true class <=
    chosen) under it).
    """

    features: pd.DataFrame | None
    proba: dict[str, np.ndarray]
    model_chosen: dict[str, np.ndarray]
    chosen: dict[str, np.ndarray]
    confidence: dict[str, np.ndarray]
    followed: dict[str, np.ndarray]
    record_accuracy: dict[str, np.ndarray] = field(default_factory=dict)
    distribution: dict[str, np.ndarray] = field(default_factory=dict)


def _bound(value: float) -> float | None:
    return None if math.isinf(value) else float(value)


class Predictor:
    """Predict and decide for tasks with one bundle (one registered model version).

    Parameters
    ----------
    bundle:
        The loaded bundle.
    model_name, model_version:
        Registry identity, written into every prediction and audit row.
    """

    def __init__(self, bundle: Bundle, model_name: str, model_version: str) -> None:
        self.bundle = bundle
        self.model_name = model_name
        self.model_version = str(model_version)
        self._known_transformations = set(bundle.known_transformations)
        self._known_frameworks = set(bundle.known_frameworks)
        self._class_cache: dict[str, list[Any]] = {}
        self._record_cache: tuple[pd.DataFrame, Any] | None = None
        self._matrix_fn: MatrixFn | None = self._build_matrix_fn()

    def features(
        self, tasks: pd.DataFrame, history: RecentHistoryIndex | pd.DataFrame | None
    ) -> pd.DataFrame:
        """Return the model features of ``tasks`` (see FeaturePipeline.transform)."""
        return self.bundle.features.transform(tasks, history)

    def probabilities(self, X: pd.DataFrame) -> dict[str, np.ndarray]:
        """Return the class probabilities of every target for a feature frame."""
        return {t: m.predict_proba(X) for t, m in self.bundle.models.items()}

    def in_domain(self, tasks: pd.DataFrame) -> np.ndarray:
        """Return, per task, whether its transformation or framework was seen.

        The vectorised form of
        :func:`~panda_predictor.core.scout_policy.in_training_domain`
        (a NULL transformation or framework is never known).
        """
        frameworks, _ = split_transhome(tasks["transhome"])
        paths = (
            tasks["transpath"]
            .astype(object)
            .where(tasks["transpath"].notna(), NO_TRANSFORMATION)
        )
        known_path = paths.isin(self._known_transformations)
        known_framework = frameworks.isin(self._known_frameworks)
        return known_path.to_numpy(bool) | known_framework.to_numpy(bool)

    def classify(
        self,
        tasks: pd.DataFrame,
        history: RecentHistoryIndex | pd.DataFrame | ServingHistory | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Return per target the probabilities, chosen classes and confidences.

        With a labelled history (a frame or a :class:`ServingHistory`) and a
        bundle that combines experts, the chosen class is the followed expert's
        and the confidence is that expert's recent weighted accuracy for the
        task's key (see :meth:`classified`).
        """
        parts = self.classified(tasks, history)
        return parts.proba, parts.chosen, parts.confidence

    def classified(
        self,
        tasks: pd.DataFrame,
        history: RecentHistoryIndex | pd.DataFrame | ServingHistory | None = None,
    ) -> Classified:
        """Return :meth:`classify`'s answer with its parts (features, the model's
        own class, the followed expert), for callers that score the parts."""
        served = history if isinstance(history, ServingHistory) else None
        X = self.features(tasks, served.index if served is not None else history)
        proba = self.probabilities(X)
        chosen = {t: self.bundle.tail_rules[t].predict(p) for t, p in proba.items()}
        parts = Classified(X, proba, dict(chosen), chosen, {}, {})
        combined: dict[str, Any] = {}
        params = self.bundle.combination
        if params is not None and isinstance(history, pd.DataFrame):
            combined = self.combined(tasks, X, chosen, history)
        elif params is not None and served is not None:
            keys = group_key(tasks, HISTORY_GROUPS[params.key]).to_numpy(object)
            combined = combine_served(self.bundle, keys, X, chosen, served)
        for target, answer in combined.items():
            parts.chosen[target] = answer.classes
            parts.record_accuracy[target] = answer.confidence
            parts.followed[target] = answer.leader
        parts.distribution = self.distribution_of(
            proba, parts.chosen, parts.followed, parts.record_accuracy
        )
        parts.confidence = {
            t: confidence(parts.distribution[t], parts.chosen[t]) for t in proba
        }
        return parts

    def distribution_of(
        self,
        proba: Mapping[str, np.ndarray],
        chosen: Mapping[str, np.ndarray],
        followed: Mapping[str, np.ndarray],
        record_accuracy: Mapping[str, np.ndarray],
    ) -> dict[str, np.ndarray]:
        """Return per target the calibrated served distribution (n x K).

        The served distribution is the model's probabilities where the task follows
        the model (or nothing is combined), else ``w * onehot(chosen) + (1 - w) *
        proba`` for the followed rule's class and recent weighted accuracy ``w``
        (:func:`~panda_predictor.core.calibration.served_mixture`); the bundle's
        calibrator of the target then maps it to calibrated probabilities (a
        calibrator may treat rows that follow a rule apart). Both
        routes call this, so they cannot drift apart.
        """
        return {
            t: self.bundle.calibrator(t).transform(
                served_mixture(p, chosen[t], followed.get(t), record_accuracy.get(t)),
                followed.get(t),
            )
            for t, p in proba.items()
        }

    def combined(
        self,
        tasks: pd.DataFrame,
        X: pd.DataFrame,
        chosen: dict[str, np.ndarray],
        history: pd.DataFrame,
    ) -> dict[str, Any]:
        """Return the experts' combination per target (model + recency rules).

        The model's track record is rebuilt from ``history`` once per history
        frame (the last one is kept), see :mod:`panda_predictor.serving.combination`.
        """

        cached = self._record_cache
        if cached is None or cached[0] is not history:
            cached = (history, track_records(self.bundle, history))
            self._record_cache = cached
        return combine(self.bundle, tasks, X, chosen, cached[1])

    def predict(
        self,
        tasks: pd.DataFrame,
        history: RecentHistoryIndex | pd.DataFrame | None = None,
        now: datetime | None = None,
    ) -> list[TaskPrediction]:
        """Return one prediction (with its decision and reason) per row of ``tasks``.

        Small frames (up to :data:`FAST_PATH_MAX_ROWS` rows, history None or a
        :class:`RecentHistoryIndex`) take the records route; the result is the same.
        """
        if tasks.empty:
            return []
        if (
            self._matrix_fn is not None
            and len(tasks) <= FAST_PATH_MAX_ROWS
            and not isinstance(history, pd.DataFrame)
        ):
            self.bundle.features._check_tasks(tasks)
            columns = [*TASK_COLUMNS, *(c for c in REQUEST_COLUMNS if c in tasks)]
            return self.predict_records(tasks[columns].to_dict("records"), history, now)
        proba, chosen, conf = self.classify(tasks, history)
        domain = self.in_domain(tasks)
        with _no_cyclic_gc():
            decisions = self.bundle.policy().decide_many(chosen, conf, domain)
            ids = tasks["jeditaskid"].to_numpy()
            return self._assemble(ids, proba, chosen, conf, decisions, now)

    def predict_table(
        self,
        tasks: pd.DataFrame,
        history: RecentHistoryIndex | pd.DataFrame | None = None,
    ) -> pd.DataFrame:
        """Return the predictions of a large batch as columns, one row per task.

        The same features, models, tail rules, confidences and policy as
        :meth:`predict`, without building one record per task: for bulk callers
        (drift checks, replays, offline scoring) that read columns anyway. Columns:
        ``jeditaskid``, ``decision``, ``reason_kind``, ``weakest_target``,
        ``weakest_confidence`` (see
        :meth:`~panda_predictor.core.scout_policy.DecisionPolicy.decide_table`), then
        per target ``<target>_class``, ``<target>_value`` (the value written, in the
        bin's unit) and ``<target>_confidence``.
        """
        if tasks.empty:
            return pd.DataFrame(columns=self.table_columns())
        return self.table_of(tasks, self.classified(tasks, history))

    def table_of(self, tasks: pd.DataFrame, parts: Classified) -> pd.DataFrame:
        """Return :meth:`predict_table`'s columns for already classified tasks.

        Besides the columns above, ``<target>_expert`` names the followed expert
        where the bundle combines experts.
        """
        chosen, conf = parts.chosen, parts.confidence
        decided = self.bundle.policy().decide_table(chosen, conf, self.in_domain(tasks))
        columns: dict[str, Any] = {"jeditaskid": tasks["jeditaskid"].to_numpy()}
        columns.update(decided)
        for t in chosen:
            bins = self.bundle.bins[t]
            # The value written, read back in the bin's unit (rounded as PanDA does).
            values = np.array(
                [
                    from_panda(*bins.panda_value_of(cls))[0]
                    for cls in range(bins.n_classes)
                ]
            )
            columns[f"{t}_class"] = chosen[t]
            columns[f"{t}_value"] = values[chosen[t]]
            columns[f"{t}_confidence"] = conf[t]
            if t in parts.followed:
                columns[f"{t}_expert"] = np.asarray(EXPERTS)[parts.followed[t]]
        return pd.DataFrame(columns, index=tasks.index)

    def table_columns(self) -> list[str]:
        """Return the column names of :meth:`predict_table`, in order."""
        fixed = [
            "jeditaskid",
            "decision",
            "reason_kind",
            "weakest_target",
            "weakest_confidence",
        ]
        per_target = ("class", "value", "confidence")
        return fixed + [f"{t}_{c}" for t in self.bundle.models for c in per_target]

    def predict_records(
        self,
        records: Sequence[Mapping[str, Any]],
        history: RecentHistoryIndex | ServingHistory | None = None,
        now: datetime | None = None,
        matrix: np.ndarray | None = None,
    ) -> list[TaskPrediction]:
        """Return one prediction per task record (the low-latency route).

        Parameters: ``records`` are maps with the keys of
        :data:`~panda_predictor.core.features.TASK_COLUMNS` (one task as the HTTP
        service or the JEDI plugin sees it; NULL is None or NaN); ``history`` the
        recent-history index, or a :class:`ServingHistory` (history features and
        the experts' records as of one time), or None (history unknown); ``now``
        the time
        stamped on the predictions; ``matrix`` the records' code matrix
        (``FeaturePipeline.transform_records`` with the same history), when the
        caller built it already for another use (explanations). Gives what
        :meth:`predict` gives for the same tasks as a frame.
        """
        features = self.bundle.features
        if self._matrix_fn is None:
            frame = pd.DataFrame(features._check_records(records))
            return self.predict(frame, history, now) if len(frame) else []
        parts = self.classified_records(records, history, matrix)
        if parts is None:
            return []
        chosen, conf = parts.chosen, parts.confidence
        domain = np.array([self._record_in_domain(r) for r in records], dtype=bool)
        decisions = self.bundle.policy().decide_many(chosen, conf, domain)
        ids = [r["jeditaskid"] for r in records]
        return self._assemble(ids, parts.proba, chosen, conf, decisions, now)

    def classified_records(
        self,
        records: Sequence[Mapping[str, Any]],
        history: RecentHistoryIndex | ServingHistory | None = None,
        matrix: np.ndarray | None = None,
    ) -> Classified | None:
        """Return :meth:`classified`'s parts for task records (the records route).

        None when the bundle's models have no code-matrix route or there is no
        record. ``features`` is None unless the combination needed the frame.
        """
        features = self.bundle.features
        if self._matrix_fn is None:
            return None
        served = history if isinstance(history, ServingHistory) else None
        index = served.index if served is not None else history
        M = features.transform_records(records, index) if matrix is None else matrix
        if len(M) == 0:
            return None
        proba = self._matrix_fn(M)
        chosen = {t: self.bundle.tail_rules[t].predict(p) for t, p in proba.items()}
        parts = Classified(None, proba, dict(chosen), chosen, {}, {})
        params = self.bundle.combination
        if served is not None and params is not None:
            columns = HISTORY_GROUPS[params.key]
            keys = np.array([record_key(r, columns) for r in records], dtype=object)
            parts.features = X = pd.DataFrame(M, columns=features.feature_names_out_)
            for target, answer in combine_served(
                self.bundle, keys, X, chosen, served
            ).items():
                chosen[target] = answer.classes
                parts.followed[target] = answer.leader
                parts.record_accuracy[target] = answer.confidence
        parts.distribution = self.distribution_of(
            proba, chosen, parts.followed, parts.record_accuracy
        )
        parts.confidence = {
            t: confidence(parts.distribution[t], chosen[t]) for t in proba
        }
        return parts

    def _record_in_domain(self, record: Mapping[str, Any]) -> bool:
        """Return :meth:`in_domain` for one task record."""
        framework, _ = split_transhome_value(record["transhome"])
        return in_training_domain(
            text_value(record["transpath"]),
            framework,
            self._known_transformations,
            self._known_frameworks,
        )

    def _build_matrix_fn(self) -> MatrixFn | None:
        """Return the code-matrix route of every model, or None if one lacks it.

        A model takes codes only when its schema and categories are the feature
        pipeline's; Keras networks run together in one ``tf.function``.
        """
        features = self.bundle.features
        names, vocab = features.feature_names_out_, features.vocabularies_
        models = self.bundle.models
        if not models or not all(
            m.accepts_codes(names, vocab) for m in models.values()
        ):
            return None
        # Networks served by TensorFlow run in one tf.function; the numpy ones (the
        # usual case, see models.keras_numpy) answer predict_proba_matrix cheaply.
        keras_targets = [
            t for t, m in models.items() if getattr(m, "runtime", "") == "tensorflow"
        ]
        joint = None
        if keras_targets:
            from panda_predictor.models.keras_net import joint_proba_matrix_fn

            joint = joint_proba_matrix_fn([models[t] for t in keras_targets])  # type: ignore[misc]

        def probabilities(M: np.ndarray) -> dict[str, np.ndarray]:
            out = dict(zip(keras_targets, joint(M), strict=True)) if joint else {}
            for target, model in models.items():
                if target not in out:
                    out[target] = model.predict_proba_matrix(M)
            return {t: out[t] for t in models}

        return probabilities

    def _assemble(
        self,
        task_ids: Sequence[Any],
        proba: dict[str, np.ndarray],
        chosen: dict[str, np.ndarray],
        conf: dict[str, np.ndarray],
        decisions: list[TaskDecision],
        now: datetime | None,
    ) -> list[TaskPrediction]:
        """Return the TaskPrediction records of a batch from its per-target arrays."""
        stamp = now or datetime.now(UTC).replace(tzinfo=None)
        # Plain Python lists once per batch: indexing numpy per task costs more.
        columns = {
            t: (chosen[t].tolist(), conf[t].tolist(), proba[t].tolist()) for t in proba
        }
        classes = {t: self._classes(t) for t in proba}
        out = []
        for i, task_id in enumerate(task_ids):
            targets = {}
            for t, (cls_list, conf_list, proba_list) in columns.items():
                cls = int(cls_list[i])
                label, low, high, value, unit = classes[t][cls]
                targets[t] = TargetPrediction(
                    target=t,
                    class_index=cls,
                    class_label=label,
                    lower=low,
                    upper=high,
                    value=value,
                    unit=unit,
                    confidence=float(conf_list[i]),
                    probabilities=tuple(map(round, proba_list[i], _FOURS)),
                    choice=self.bundle.tail_rules[t].explain(
                        proba_list[i], cls, [row[0] for row in classes[t]]
                    ),
                )
            out.append(
                TaskPrediction(
                    jeditaskid=int(task_id),
                    model_name=self.model_name,
                    model_version=self.model_version,
                    decision=decisions[i].decision,  # type: ignore[arg-type]
                    reason=decisions[i].reason,
                    targets=targets,
                    predicted_at=stamp,
                )
            )
        return out

    def _classes(
        self, target: str
    ) -> list[tuple[str, float | None, float | None, float, str]]:
        """Return (label, lower, upper, value, unit) of each class (computed once).

        The value is the bin's float value: it is rounded once, by the writer's
        conversion to PanDA's stored form (:mod:`panda_predictor.core.units`), so
        2.3 HS06sPerEvent is written as 2300 mHS06sPerEvent, never as 3000.
        """
        cache = self._class_cache
        if target not in cache:
            bins = self.bundle.bins[target]
            rows = []
            for cls in range(bins.n_classes):
                low, high = bins.range_of(cls)
                value = float(bins.value_of(cls))
                rows.append(
                    (bins.labels[cls], _bound(low), _bound(high), value, bins.unit)
                )
            cache[target] = rows
        return cache[target]
