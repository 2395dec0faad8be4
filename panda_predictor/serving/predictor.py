"""Turn task rows into :class:`TaskPrediction` records with a loaded bundle.

The same code serves the database hook, the HTTP service, the JEDI refiner plugin,
``panda-predictor predict`` and the benchmark: features -> per-target probabilities
(the models' fast paths) -> tail decision rule and expert combination -> the
served distribution -> the value of lowest expected cost per target and the
applied / kept_scouts decision
(:class:`~panda_predictor.core.decide.scout_policy.CostPolicy`, one columnar rule,
:meth:`Predictor.decide`, that every route ends in).

Three routes give the same predictions: the DataFrame route (vectorised pandas, best
for large batches), :meth:`Predictor.predict_table` (the same, returned as columns
instead of one record per task, for bulk callers) and the records route
(:meth:`Predictor.predict_records`: plain dict lookups into a float32 code matrix,
for one task or a few; ~1 ms instead of ~20 ms for one task). :meth:`Predictor.predict`
picks the records route for frames of up to :data:`FAST_PATH_MAX_ROWS` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from panda_predictor.core.decide.calibration import calibrated_mixture
from panda_predictor.core.decide.cost_choice import CostSettings
from panda_predictor.core.decide.experts import EXPERTS, Combined
from panda_predictor.core.decide.recency_rules import FeatureColumns
from panda_predictor.core.decide.scout_policy import in_training_domain
from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.core.features.history import (
    HISTORY_GROUPS,
    RecentHistoryIndex,
    group_key,
    is_null,
    record_key,
    split_transhome,
    split_transhome_value,
)
from panda_predictor.core.features.pipeline import TASK_COLUMNS
from panda_predictor.core.features.task_features import REQUEST_COLUMNS, REQUEST_PREFIX
from panda_predictor.core.identity_cache import cached_by_identity
from panda_predictor.serving.bundle import Bundle
from panda_predictor.serving.classified import (
    ClassConfidence,
    Classified,
    served_distribution,
)
from panda_predictor.serving.combination import (
    ServingHistory,
    as_history,
    combine,
    combine_served,
)
from panda_predictor.serving.prediction_records import (
    ClassRow,
    class_rows,
    no_cyclic_gc,
    task_predictions,
)

#: Decimals the models' probabilities are rounded to before calibration.
PROBA_DECIMALS = 5


def priced_probabilities(proba: Any) -> np.ndarray:
    """Return a model's probabilities as every route calibrates them: rounded.

    The frame and the records routes may differ in the last float32 digits
    (Keras), which a steep isotonic step or the cost choice must not turn into
    different answers; the benchmark's calibration refits start from the same.
    """
    return np.asarray(proba, dtype=float).round(PROBA_DECIMALS)


#: Frames up to this many rows take the records route in :meth:`Predictor.predict`;
#: beyond it vectorised pandas is faster per task.
FAST_PATH_MAX_ROWS = 32

#: What every prediction takes as history: a labelled history frame (judged per
#: task as of its creation), a :class:`ServingHistory`, or None (no history).
History: TypeAlias = ServingHistory | pd.DataFrame | None

#: Code matrix -> probabilities per target.
MatrixFn = Callable[[np.ndarray], dict[str, np.ndarray]]


class Predictor:
    """Predict and decide for tasks with one bundle (one registered model version).

    Parameters
    ----------
    bundle:
        The loaded bundle.
    model_name, model_version:
        Registry identity, written into every prediction and audit row.
    cost:
        Prices of the cost policy; default: the ones the bundle was trained with
        (the ``delay_price`` setting overrides them, see :func:`cost_settings`).
    """

    def __init__(
        self,
        bundle: Bundle,
        model_name: str,
        model_version: str,
        cost: CostSettings | None = None,
    ) -> None:
        self.bundle = bundle
        self.policy = bundle.policy(cost)
        self.model_name = model_name
        self.model_version = str(model_version)
        self._known_transformations = set(bundle.known_transformations)
        self._known_frameworks = set(bundle.known_frameworks)
        self._class_cache: dict[str, list[ClassRow]] = {}
        self._matrix_fn: MatrixFn | None = self._build_matrix_fn()

    @property
    def fixed_targets(self) -> tuple[str, ...]:
        """Return the targets whose values this predictor writes ``...Fixed``
        (kept through PanDA's re-measurement; chosen by training per deployment)."""
        return self.policy.settings.fixed_targets

    def features(
        self,
        tasks: pd.DataFrame,
        history: ServingHistory | RecentHistoryIndex | pd.DataFrame | None,
    ) -> pd.DataFrame:
        """Return the model features of ``tasks`` (see FeaturePipeline.transform).

        A :class:`ServingHistory` is read as :meth:`classified` reads it: its index
        when it is set as of one time, else its frame's running statistics (each
        task sees what was known before it; built once, see
        :meth:`ServingHistory.statistics`).
        """
        if isinstance(history, ServingHistory):
            history = (
                history.index
                if history.as_of is not None
                else history.statistics(self.bundle.features)
            )
        return self.bundle.features.transform(tasks, history)

    def probabilities(self, X: pd.DataFrame) -> dict[str, np.ndarray]:
        """Return the class probabilities of every target for a feature frame."""
        return {t: m.predict_proba(X) for t, m in self.bundle.models.items()}

    def in_domain(self, tasks: pd.DataFrame) -> np.ndarray:
        """Return, per task, whether its transformation or framework was seen.

        :func:`~panda_predictor.core.decide.scout_policy.in_training_domain` row by
        row (:meth:`_known`), the rule the records route applies to one task.
        """
        frameworks, _ = split_transhome(tasks["transhome"])
        return np.fromiter(
            map(self._known, tasks["transpath"].tolist(), frameworks.tolist()),
            dtype=bool,
            count=len(tasks),
        )

    def _known(self, transformation: Any, framework: Any) -> bool:
        """Return whether a task of this transformation or framework is in the
        training domain (NULL, NaN or None: no transformation, no framework)."""
        return in_training_domain(
            None if is_null(transformation) else transformation,
            None if is_null(framework) else framework,
            self._known_transformations,
            self._known_frameworks,
        )

    def classify(
        self, tasks: pd.DataFrame, history: History = None
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Return per target the probabilities, chosen classes and confidences.

        With a history and a bundle that combines experts, the chosen class is the
        followed expert's and the confidence is that expert's recent weighted
        accuracy for the task's key (see :meth:`classified`).
        """
        parts = self.classified(tasks, history)
        return parts.proba, parts.chosen, dict(parts.confidence)

    def history(self, history: History) -> ServingHistory | None:
        """Return ``history`` as a :class:`ServingHistory` (see :func:`as_history`).

        The last frame wrapped is kept, so that the batches of one hook pass
        rebuild the model's track record once.
        """
        if isinstance(history, pd.DataFrame):
            frame = history
            return cached_by_identity(
                self, "_served_frame", (frame,), lambda: ServingHistory(frame)
            )
        return as_history(history)

    def classified(self, tasks: pd.DataFrame, history: History = None) -> Classified:
        """Return :meth:`classify`'s answer with its parts (features, the model's
        own class, the followed expert), for callers that score the parts.

        The combination runs whenever there is a history and the bundle has one;
        a history with ``as_of`` serves tasks created then from its index.
        """
        served = self.history(history)
        X = self.features(tasks, served)
        params = self.bundle.combination

        def combined(chosen: dict[str, np.ndarray]) -> dict[str, Combined]:
            assert params is not None and served is not None
            if served.as_of is None:
                records = served.records(self.bundle)
                return combine(self.bundle, tasks, X, chosen, records)
            keys = group_key(tasks, HISTORY_GROUPS[params.key]).to_numpy(object)
            return combine_served(self.bundle, keys, X, chosen, served)

        combines = params is not None and served is not None
        return self._classified(
            X, self.probabilities(X), combined if combines else None
        )

    def _classified(
        self,
        X: FeatureColumns,
        proba: dict[str, np.ndarray],
        combined: Callable[[dict[str, np.ndarray]], dict[str, Combined]] | None,
    ) -> Classified:
        """Return the parts of classified tasks from their models' probabilities.

        Both routes end here, so the steps after the models are written once: the
        tail rule's class, the expert combination (``combined``: the followed
        expert per target for the model's classes; None: no combination) and the
        calibrated served distribution.
        """
        chosen = {t: self.bundle.tail_rules[t].predict(p) for t, p in proba.items()}
        parts = Classified(X, proba, dict(chosen), chosen, {}, {})
        if combined is not None:
            for target, answer in combined(dict(chosen)).items():
                parts.chosen[target] = answer.classes
                parts.record_accuracy[target] = answer.confidence
                parts.followed[target] = answer.leader
        parts.distribution = self.distribution_of(
            proba, parts.chosen, parts.followed, parts.record_accuracy
        )
        parts.confidence = ClassConfidence(served_distribution(parts), parts.chosen)
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
        (:func:`~panda_predictor.core.decide.calibration.served_mixture`); the bundle's
        calibrator of the target then maps it to calibrated probabilities (a
        calibrator may treat rows that follow a rule apart). Both
        routes call this, so they cannot drift apart.
        """
        return {
            t: calibrated_mixture(
                self.bundle.calibrator(t),
                priced_probabilities(p),
                chosen[t],
                followed.get(t),
                record_accuracy.get(t),
            )
            for t, p in proba.items()
        }

    def predict(
        self,
        tasks: pd.DataFrame,
        history: History = None,
        now: datetime | None = None,
    ) -> list[TaskPrediction]:
        """Return one prediction (with its decision and reason) per row of ``tasks``.

        Small frames (up to :data:`FAST_PATH_MAX_ROWS` rows, with no history or
        one indexed as of a time) take the records route; the result is the same.
        """
        if tasks.empty:
            return []
        served = self.history(history)
        if (
            self._matrix_fn is not None
            and len(tasks) <= FAST_PATH_MAX_ROWS
            and (served is None or served.as_of is not None)
        ):
            self.bundle.features._check_tasks(tasks)
            columns = [*TASK_COLUMNS, *(c for c in REQUEST_COLUMNS if c in tasks)]
            return self.predict_records(tasks[columns].to_dict("records"), served, now)
        parts = self.classified(tasks, served)
        decided = self.decide(parts, self.in_domain(tasks))
        with no_cyclic_gc():
            ids = tasks["jeditaskid"].to_numpy()
            return self._assemble(ids, parts, decided, now)

    def decide(self, parts: Classified, in_domain: np.ndarray) -> dict[str, np.ndarray]:
        """Return the one decision's columns for classified tasks.

        Every route ends here: the value of lowest expected cost per target (never
        above the task's request), its expected cost and the probability that it is
        enough, and applied / kept_scouts per task (see
        :meth:`~panda_predictor.core.decide.scout_policy.CostPolicy.decide_table`).
        """
        return self.policy.decide_table(
            served_distribution(parts), parts.chosen, self.requests(parts), in_domain
        )

    def requests(self, parts: Classified) -> dict[str, np.ndarray]:
        """Return per target the tasks' requests the decision caps values at.

        In the target's unit (NaN: none); a target without a request column is
        left out. Shared with the replays, which price the scouts at the request.
        """
        requests: dict[str, np.ndarray] = {}
        features = parts.features
        if features is None:
            return requests
        for target in parts.chosen:
            column = REQUEST_PREFIX + target
            if column in features:
                requests[target] = np.asarray(features[column], dtype=float)
        return requests

    def predict_table(
        self, tasks: pd.DataFrame, history: History = None
    ) -> pd.DataFrame:
        """Return the predictions of a large batch as columns, one row per task.

        The same features, models, combination and decision as :meth:`predict`,
        without building one record per task: for bulk callers (drift checks,
        replays, the benchmark) that read columns anyway. Columns: ``jeditaskid``,
        ``decision``, ``reason_kind``, ``total_cost``, ``costliest_target``, then
        per target ``<target>_class`` (the predicted class: the model with its tail
        rule, or the followed expert), ``<target>_value`` (the value written, in
        the bin's unit: the cost choice, which may lie above the class when the
        class is uncertain), ``<target>_confidence`` (the probability that the
        value is enough) and ``<target>_cost`` (job runs).
        """
        if tasks.empty:
            return pd.DataFrame(columns=self.table_columns())
        return self.table_of(tasks, self.classified(tasks, history))

    def table_of(self, tasks: pd.DataFrame, parts: Classified) -> pd.DataFrame:
        """Return :meth:`predict_table`'s columns for already classified tasks.

        Besides the columns above, ``scouts_cost`` is what running the scouts is
        expected to cost, ``early_remeasure`` whether the hook asks PanDA to
        re-measure the task once its first 3 jobs settled (``CostPolicy._early``:
        every value PanDA re-measures is the scouts' own first value, or a target
        writes that for every task), ``<target>_from_request``
        says whether the request itself was the cheapest value, and
        ``<target>_expert`` names the followed expert where the bundle combines
        experts (``model`` without a history).
        """
        decided = self.decide(parts, self.in_domain(tasks))
        columns: dict[str, Any] = {"jeditaskid": tasks["jeditaskid"].to_numpy()}
        for key in ("decision", "reason_kind", "total_cost", "scouts_cost"):
            columns[key] = decided[key]
        columns["early_remeasure"] = decided["early_remeasure"]
        columns["costliest_target"] = decided["costliest_target"]
        combined = self.bundle.combination is not None
        for t in parts.chosen:
            value = decided[f"{t}_value"]
            columns[f"{t}_class"] = parts.chosen[t]
            columns[f"{t}_value"] = value
            columns[f"{t}_confidence"] = decided[f"{t}_confidence"]
            columns[f"{t}_cost"] = decided[f"{t}_cost"]
            columns[f"{t}_from_request"] = decided[f"{t}_from_request"]
            if combined:  # without a history every task follows the model
                followed = parts.followed.get(t)
                columns[f"{t}_expert"] = (
                    np.asarray(EXPERTS)[followed]
                    if followed is not None
                    else np.full(len(tasks), EXPERTS[0], dtype=object)
                )
        return pd.DataFrame(columns, index=tasks.index)

    def table_columns(self) -> list[str]:
        """Return the column names of :meth:`predict_table`, in order."""
        fixed = [
            "jeditaskid",
            "decision",
            "reason_kind",
            "total_cost",
            "scouts_cost",
            "early_remeasure",
            "costliest_target",
        ]
        per_target = ["class", "value", "confidence", "cost", "from_request"]
        if self.bundle.combination is not None:
            per_target.append("expert")
        return fixed + [f"{t}_{c}" for t in self.bundle.models for c in per_target]

    def serves_records(self, history: History = None) -> bool:
        """Return whether :meth:`predict` would take the records route with ``history``.

        That is, the bundle has the code-matrix fast path and the history is
        unknown or indexed as of one time (:meth:`predict`'s rule for small frames).
        """
        if self._matrix_fn is None:
            return False
        served = self.history(history)
        return served is None or served.as_of is not None

    def predict_records(
        self,
        records: Sequence[Mapping[str, Any]],
        history: ServingHistory | None = None,
        now: datetime | None = None,
        matrix: np.ndarray | None = None,
    ) -> list[TaskPrediction]:
        """Return one prediction per task record (the low-latency route).

        Parameters: ``records`` are maps with the keys of
        :data:`~panda_predictor.core.features.pipeline.TASK_COLUMNS` (one task as the
        HTTP service or the JEDI plugin sees it; NULL is None or NaN); ``history`` a
        :class:`ServingHistory` indexed as of one time (history features and
        the experts' records as of then), or None (history unknown); ``now``
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
        domain = np.array([self._record_in_domain(r) for r in records], dtype=bool)
        decided = self.decide(parts, domain)
        ids = [r["jeditaskid"] for r in records]
        return self._assemble(ids, parts, decided, now)

    def classified_records(
        self,
        records: Sequence[Mapping[str, Any]],
        history: ServingHistory | None = None,
        matrix: np.ndarray | None = None,
    ) -> Classified | None:
        """Return :meth:`classified`'s answer for task records (the code-matrix
        route; None for no records)."""
        features = self.bundle.features
        assert self._matrix_fn is not None
        served = as_history(history)
        if served is not None and served.as_of is None:
            raise ValueError(
                "Task records are served from a history indexed as of one time: "
                "give the ServingHistory an 'as_of'."
            )
        index = served.index if served is not None else None
        M = features.transform_records(records, index) if matrix is None else matrix
        if len(M) == 0:
            return None
        X = features.matrix_columns(M)
        params = self.bundle.combination

        def combined(chosen: dict[str, np.ndarray]) -> dict[str, Combined]:
            assert params is not None and served is not None
            columns = HISTORY_GROUPS[params.key]
            keys = np.array([record_key(r, columns) for r in records], dtype=object)
            return combine_served(self.bundle, keys, X, chosen, served)

        combines = params is not None and served is not None
        return self._classified(X, self._matrix_fn(M), combined if combines else None)

    def _record_in_domain(self, record: Mapping[str, Any]) -> bool:
        """Return :meth:`in_domain` for one task record."""
        framework, _ = split_transhome_value(record["transhome"])
        return self._known(record["transpath"], framework)

    def _build_matrix_fn(self) -> MatrixFn | None:
        """Return the code-matrix route of every model, or None if one lacks it.

        A model takes codes only when its schema and categories are the feature
        pipeline's.
        """
        features = self.bundle.features
        names, vocab = features.feature_names_out_, features.vocabularies_
        models = self.bundle.models
        if not models or not all(
            m.accepts_codes(names, vocab) for m in models.values()
        ):
            return None

        def probabilities(M: np.ndarray) -> dict[str, np.ndarray]:
            return {t: model.predict_proba_matrix(M) for t, model in models.items()}

        return probabilities

    def _assemble(
        self,
        task_ids: Sequence[Any],
        parts: Classified,
        decided: Mapping[str, np.ndarray],
        now: datetime | None,
    ) -> list[TaskPrediction]:
        """Return the TaskPrediction records of a batch from the decision's columns."""
        return task_predictions(
            task_ids,
            parts,
            decided,
            model=(self.model_name, self.model_version),
            tail_rules=self.bundle.tail_rules,
            classes={t: self._classes(t) for t in parts.proba},
            delay_price=self.policy.settings.delay_price,
            now=now,
        )

    def _classes(self, target: str) -> list[ClassRow]:
        """Return :func:`class_rows` of ``target``'s bins (computed once)."""
        cache = self._class_cache
        if target not in cache:
            fixed = target in self.fixed_targets
            cache[target] = class_rows(self.bundle.bins[target], fixed)
        return cache[target]
