"""What classifying a batch of tasks gives, before the decision reads it.

:class:`Classified` holds, per target, the models' probabilities, the class each
task gets (the model's with its tail rule, or the followed expert's) and the
calibrated served distribution the cost choice prices
(:func:`served_distribution`). Every route of
:class:`~panda_predictor.serving.predictor.Predictor` builds one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from panda_predictor.core.decide.recency_rules import FeatureColumns
from panda_predictor.core.decide.tail_rule import confidence


@dataclass
class Classified:
    """What :meth:`Predictor.classified` computed for a batch of tasks.

    ``features`` the model inputs (a frame; on the records route the code
    matrix's columns by name,
    :class:`~panda_predictor.core.features.matrix_columns.MatrixColumns`); per target
    ``proba``, ``model_chosen`` (the model with its tail rule), ``chosen`` (after the
    expert combination, when the bundle has one), ``followed`` (index into
    :data:`~panda_predictor.core.decide.experts.EXPERTS`) and ``record_accuracy`` (the
    followed expert's recent weighted accuracy; both empty without combination),
    ``distribution`` (the calibrated served distribution, n x K, see
    :meth:`Predictor.distribution_of`) and ``confidence`` (P(true class <=
    chosen) under it; :class:`ClassConfidence`, computed when read: the decision
    prices its own values' confidence, so serving never reads this one).
    """

    features: FeatureColumns | None
    proba: dict[str, np.ndarray]
    model_chosen: dict[str, np.ndarray]
    chosen: dict[str, np.ndarray]
    confidence: Mapping[str, np.ndarray]
    followed: dict[str, np.ndarray]
    record_accuracy: dict[str, np.ndarray] = field(default_factory=dict)
    distribution: dict[str, np.ndarray] = field(default_factory=dict)


class ClassConfidence(Mapping[str, np.ndarray]):
    """Per target, P(true class <= chosen class) under the served distribution
    (:func:`~panda_predictor.core.decide.tail_rule.confidence`), computed on first read.

    It holds the distribution and the classes, not the :class:`Classified` that
    holds it: no reference cycle, so a served task's arrays are freed at once.
    """

    def __init__(
        self, distribution: Mapping[str, np.ndarray], chosen: Mapping[str, np.ndarray]
    ) -> None:
        self._distribution = distribution
        self._chosen = chosen
        self._done: dict[str, np.ndarray] = {}

    def __getitem__(self, target: str) -> np.ndarray:
        if target not in self._done:
            self._done[target] = confidence(
                self._distribution[target], self._chosen[target]
            )
        return self._done[target]

    def __iter__(self) -> Iterator[str]:
        return iter(self._distribution)

    def __len__(self) -> int:
        return len(self._distribution)


def served_distribution(parts: Classified) -> dict[str, np.ndarray]:
    """Return the calibrated distribution per target the decision prices.

    The calibrated served distribution (:attr:`Classified.distribution`), else
    (parts built without one) the models' probabilities.
    """
    return parts.distribution or parts.proba
