"""Turn the decision's columns into one :class:`TaskPrediction` per task.

The last step of every route of :class:`~panda_predictor.serving.predictor.Predictor`:
the columns of the decision (values, confidences, costs, applied / kept_scouts) and
of the classification (classes, probabilities) become the typed records the hook,
the HTTP service and the plugins exchange, with the sentences that say why.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from panda_predictor.core.bins import TargetBins
from panda_predictor.core.decide.scout_policy import reason_of
from panda_predictor.core.decide.tail_rule import TailDecisionRule
from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.core.domain.units import FIXED_SUFFIX

if TYPE_CHECKING:
    from panda_predictor.serving.classified import Classified

#: One class of a target: (label, lower, upper, value, unit); None: no bound.
ClassRow: TypeAlias = tuple[str, float | None, float | None, float, str]

#: Digits kept of each stored probability (``round``'s second argument, per class).
_FOURS = itertools.repeat(4)


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
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


def _bound(value: float) -> float | None:
    return None if math.isinf(value) else float(value)


def class_rows(bins: TargetBins, fixed: bool = False) -> list[ClassRow]:
    """Return (label, lower, upper, value, unit) of each class of ``bins``.

    ``fixed``: the unit is PanDA's ``...Fixed`` form (``MBPerCoreFixed``): the
    decision keeps its values through PanDA's re-measurement
    (:attr:`~panda_predictor.core.decide.cost_choice.CostSettings.fixed_targets`).

    The value is the bin's float value: it is rounded once, by the writer's
    conversion to PanDA's stored form (:mod:`panda_predictor.core.domain.units`), so
    2.3 HS06sPerEvent is written as 2300 mHS06sPerEvent, never as 3000.
    """
    rows = []
    for cls in range(bins.n_classes):
        low, high = bins.range_of(cls)
        value = float(bins.value_of(cls))
        unit = bins.unit + FIXED_SUFFIX if fixed else bins.unit
        rows.append((bins.labels[cls], _bound(low), _bound(high), value, unit))
    return rows


def task_predictions(
    task_ids: Sequence[Any],
    parts: Classified,
    decided: Mapping[str, np.ndarray],
    *,
    model: tuple[str, str],
    tail_rules: Mapping[str, TailDecisionRule],
    classes: Mapping[str, list[ClassRow]],
    delay_price: float,
    now: datetime | None,
) -> list[TaskPrediction]:
    """Return the TaskPrediction records of a batch from the decision's columns.

    :param parts: the tasks' classified parts (classes, probabilities).
    :param decided: the decision's columns (``CostPolicy.decide_table``).
    :param model: the registered model's name and version, written in each record.
    :param tail_rules: per target, the tail rule that explains the class.
    :param classes: per target, :func:`class_rows` of its bins.
    :param delay_price: the price the reasons quote.
    :param now: the time stamped on the records (None: now).
    """
    stamp = now or datetime.now(UTC).replace(tzinfo=None)
    proba = parts.proba
    targets = list(proba)
    # Plain Python lists once per batch: indexing numpy per task costs more.
    columns = {
        t: (
            parts.chosen[t].tolist(),
            decided[f"{t}_value"].tolist(),
            decided[f"{t}_confidence"].tolist(),
            decided[f"{t}_cost"].tolist(),
            decided[f"{t}_from_request"].tolist(),
            proba[t].tolist(),
            parts.model_chosen[t].tolist(),
        )
        for t in targets
    }
    decisions = decided["decision"].tolist()
    early = decided["early_remeasure"].tolist()
    labels = {t: [c[0] for c in classes[t]] for t in targets}
    out = []
    for i, task_id in enumerate(task_ids):
        row = {}
        for t, (
            cls_l,
            val_l,
            conf_l,
            cost_l,
            req_l,
            p_l,
            model_l,
        ) in columns.items():
            cls = int(cls_l[i])
            label, low, high, _, unit = classes[t][cls]
            why = tail_rules[t].explain(p_l[i], cls, labels[t], by_rule=int(model_l[i]))
            row[t] = TargetPrediction(
                target=t,
                class_index=cls,
                class_label=label,
                lower=low,
                upper=high,
                value=float(val_l[i]),
                unit=unit,
                confidence=min(max(float(conf_l[i]), 0.0), 1.0),
                probabilities=tuple(map(round, p_l[i], _FOURS)),
                choice=_value_choice(
                    why, float(val_l[i]), unit, cost_l[i], conf_l[i], req_l[i]
                ),
            )
        out.append(
            TaskPrediction(
                jeditaskid=int(task_id),
                model_name=model[0],
                model_version=model[1],
                decision=decisions[i],
                reason=reason_of(decided, i, targets, delay_price),
                targets=row,
                predicted_at=stamp,
                early_remeasure=bool(early[i]),
            )
        )
    return out


def _value_choice(
    why: str, value: float, unit: str, cost: float, enough: float, request: bool
) -> str:
    """Return why a target got its value: the class choice, then the cost choice."""
    source = "the request" if request else "the cheapest value"
    return (
        f"{why}; writes {value:g} {unit}, {source} "
        f"(expected cost {cost:.3f} job runs, enough with p={enough:.2f})"
    )
