"""Turn task rows into :class:`TaskPrediction` records with a loaded bundle.

The same code serves the database hook, the HTTP service, the JEDI refiner plugin and
``panda-predictor predict``: features -> per-target probabilities (the models' fast
paths) -> tail decision rule -> confidence -> the applied / kept_scouts policy.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.decision import confidence, in_training_domain
from panda_predictor.core.history import RecentHistoryIndex, split_transhome
from panda_predictor.core.prediction import TargetPrediction, TaskPrediction
from panda_predictor.serving.bundle import Bundle


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

    def features(
        self, tasks: pd.DataFrame, history: RecentHistoryIndex | pd.DataFrame | None
    ) -> pd.DataFrame:
        """Return the model features of ``tasks`` (see FeaturePipeline.transform)."""
        return self.bundle.features.transform(tasks, history)

    def probabilities(self, X: pd.DataFrame) -> dict[str, np.ndarray]:
        """Return the class probabilities of every target for a feature frame."""
        return {t: m.predict_proba(X) for t, m in self.bundle.models.items()}

    def in_domain(self, tasks: pd.DataFrame) -> np.ndarray:
        """Return, per task, whether its transformation or framework was seen."""
        frameworks, _ = split_transhome(tasks["transhome"])
        return np.array(
            [
                in_training_domain(
                    tp, fw, self._known_transformations, self._known_frameworks
                )
                for tp, fw in zip(tasks["transpath"], frameworks, strict=True)
            ],
            dtype=bool,
        )

    def classify(
        self,
        tasks: pd.DataFrame,
        history: RecentHistoryIndex | pd.DataFrame | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Return per target the probabilities, chosen classes and confidences."""
        proba = self.probabilities(self.features(tasks, history))
        chosen = {t: self.bundle.tail_rules[t].predict(p) for t, p in proba.items()}
        conf = {t: confidence(proba[t], chosen[t]) for t in proba}
        return proba, chosen, conf

    def predict(
        self,
        tasks: pd.DataFrame,
        history: RecentHistoryIndex | pd.DataFrame | None = None,
        now: datetime | None = None,
    ) -> list[TaskPrediction]:
        """Return one prediction (with its decision and reason) per row of ``tasks``."""
        if tasks.empty:
            return []
        proba, chosen, conf = self.classify(tasks, history)
        decisions = self.bundle.policy().decide_many(chosen, conf, self.in_domain(tasks))
        stamp = now or datetime.now(UTC).replace(tzinfo=None)
        out = []
        for i, task_id in enumerate(tasks["jeditaskid"].to_numpy()):
            targets = {
                t: self._target_prediction(t, int(chosen[t][i]), float(conf[t][i]),
                                           proba[t][i])
                for t in proba
            }
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

    def _target_prediction(
        self, target: str, cls: int, conf: float, proba: Any
    ) -> TargetPrediction:
        bins = self.bundle.bins[target]
        low, high = bins.range_of(cls)
        return TargetPrediction(
            target=target,
            class_index=cls,
            class_label=bins.labels[cls],
            lower=_bound(low),
            upper=_bound(high),
            value=int(math.ceil(bins.value_of(cls))),
            unit=bins.unit,
            confidence=conf,
            probabilities=tuple(round(float(p), 4) for p in proba),
        )
