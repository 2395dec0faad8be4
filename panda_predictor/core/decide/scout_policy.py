"""The applied / kept_scouts policy: skip the scouts where that costs less.

:class:`CostPolicy` sizes every priced target by expected cost
(:mod:`panda_predictor.core.decide.cost_choice`) and keeps a task's scouts only where
skipping them is expected to cost more than running them. An uncertain target gets
a safer value; it sends the task back to scouts only when the safer value's waste
costs more than the scouts' delay. A task outside what the models were trained on
(both its transformation and its framework unseen) is not sized by them: it starts
at once with what its scouts would have asked for (its requests, else the defaults),
and PanDA measures it after 5 jobs as it would have measured its
scouts, without the wait.

One rule, two outputs: :meth:`CostPolicy.decide_table` returns whole columns (the
bulk form, what every caller runs), and :func:`reason_of` turns one row of it into
the sentence the audit table, the hook and the HTTP service show.

Pure numpy, like the rest of the core.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from panda_predictor.core.decide import row_math
from panda_predictor.core.decide.cost_choice import CostChooser, CostSettings, Sizing
from panda_predictor.core.reason_text import compared, number

APPLIED = "applied"
KEPT_SCOUTS = "kept_scouts"

#: ``reason_kind`` values of :meth:`CostPolicy.decide_table`.
COSTS_MORE = "costs_more"
CHEAPER = "cheaper"
#: An unfamiliar task: it starts at once with what its scouts would have asked
#: for (its requests, else the defaults: the queue's memory, the top time class).
OUTSIDE_DOMAIN = "outside_domain"


#: Stands for "no transformation" in a bundle's known transformations: a log
#: whose tasks name none (a job log without executables) is still familiar.
NO_TRANSFORMATION = "__none__"


def in_training_domain(
    transformation: str | None,
    framework: str | None,
    known_transformations: Collection[str],
    known_frameworks: Collection[str],
) -> bool:
    """Return False only when both the transformation and the framework are unseen.

    A task without a transformation counts as known when training had such tasks
    too (:data:`NO_TRANSFORMATION` is among the known transformations). The one
    rule: the predictor applies it to a batch row by row (pass sets there).
    """
    if transformation is None:
        transformation = NO_TRANSFORMATION
    return transformation in known_transformations or framework in known_frameworks


class CostPolicy:
    """Write the cheapest value per target; skip the scouts where that pays.

    :param choosers: the expected-cost choice per target (targets without one, or
        with an unpriced kind, write their fallback class and cost nothing).
    :param settings: the prices; ``settings.delay_price`` is what the scouts'
        delay costs per job, in job runs.
    """

    def __init__(self, choosers: Mapping[str, CostChooser], settings: CostSettings):
        self.choosers = dict(choosers)
        self.settings = settings

    def decide_table(
        self,
        distribution: Mapping[str, Any],
        fallback_class: Mapping[str, Any],
        request: Mapping[str, Any] | None = None,
        in_domain: Any = None,
    ) -> dict[str, np.ndarray]:
        """Decide for many tasks at once and return columns.

        :param distribution: target -> (n, K) calibrated class probabilities.
        :param fallback_class: target -> (n,) the class an unpriced target writes.
        :param request: target -> (n,) the task's request in the target's unit
            (NaN: none); the written value never exceeds it.
        :param in_domain: (n,) booleans; None means every task is in domain.

        An unfamiliar task (outside the training domain) starts at once with the
        values its scouts would have run with (OUTSIDE_DOMAIN): its requests, else
        each target's ``CostChooser.default_value``.

        Returns ``decision``, ``reason_kind`` (OUTSIDE_DOMAIN, COSTS_MORE or
        CHEAPER), ``total_cost`` (job
        runs), ``scouts_cost`` (what running the scouts is expected to cost:
        their own first jobs at the default plus the bulk's delay,
        ``delay_price``), ``costliest_target``, and per target
        ``<t>_value``, ``<t>_cost``, ``<t>_confidence`` (the probability that the
        value is enough) and ``<t>_from_request``.
        """
        names = list(distribution)
        probs, dom = self._checked(distribution, fallback_class, in_domain)
        n = dom.size
        request = request or {}
        out: dict[str, np.ndarray] = {}
        costs = []
        scouts = np.full(n, self.settings.delay_price)
        # Every task in domain (the usual case): the unfamiliar tasks' steps below
        # would change nothing, so they are skipped.
        all_in = bool(dom.all())
        # Tasks whose every value PanDA re-measures is the scouts' own first value.
        as_scouts = np.ones(n, dtype=bool)
        # Whether a target PanDA re-measures writes its scouts' value for every
        # task (its price choice): see :meth:`_early`.
        scouts_valued = False
        for t in names:
            chooser = self.choosers[t]
            sized = chooser.choose(probs[t], request.get(t), fallback_class[t])
            if chooser.writes_scouts_value:
                _as_scouts_would(sized, np.ones(n, bool), request.get(t))
            elif chooser.kind is not None and not all_in:
                _as_scouts_would(sized, ~dom, request.get(t))
            out[f"{t}_value"] = sized.value
            out[f"{t}_cost"] = sized.expected_cost
            out[f"{t}_confidence"] = 1.0 - sized.p_short
            out[f"{t}_from_request"] = sized.from_request
            if chooser.kind is not None and t not in self.settings.fixed_targets:
                as_scouts &= sized.value == sized.default
                scouts_valued |= chooser.writes_scouts_value
            costs.append(sized.expected_cost)
            scouts = scouts + sized.scouts_cost
        if n == 1 and len(names) < row_math.EXACT_SUM_BELOW:
            one = self._decide_one(
                [float(c[0]) for c in costs], scouts, bool(dom[0]), names
            )
            if one is not None:
                early = self._early(one["decision"], as_scouts | scouts_valued)
                return {**one, **out, **early}
        matrix = np.column_stack(costs)
        total = matrix.sum(axis=1)
        cheaper = total <= scouts
        if all_in:
            kind = np.where(cheaper, CHEAPER, COSTS_MORE).astype(object)
        else:
            kind = np.where(
                ~dom, OUTSIDE_DOMAIN, np.where(cheaper, CHEAPER, COSTS_MORE)
            ).astype(object)
        applied = kind != COSTS_MORE
        return {
            "decision": np.where(applied, APPLIED, KEPT_SCOUTS).astype(object),
            "reason_kind": kind,
            "total_cost": total,
            "scouts_cost": scouts,
            "costliest_target": np.asarray(names, dtype=object)[matrix.argmax(axis=1)],
            **out,
            **self._early(
                np.where(applied, APPLIED, KEPT_SCOUTS), as_scouts | scouts_valued
            ),
        }

    def _early(
        self, decision: np.ndarray, as_scouts: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Return the ``early_remeasure`` column: with the setting on
        (:attr:`~panda_predictor.core.decide.cost_choice.CostSettings.early_remeasure`),
        the applied tasks of ``as_scouts``: those whose every value PanDA
        re-measures is what their scouts would ask for (the request, else the
        default), and every applied task where a target PanDA re-measures writes
        its scouts' value for all tasks (``scouts_value_targets``).

        Such a task skipped its scouts with nothing better than their first
        value, so the hook asks PanDA to re-measure it once 3 of its jobs
        finished, as the scouts would have been
        (:mod:`panda_predictor.db.early_remeasure`): its jobs 4 and 5 get the
        scouts' measurement instead of that first value. A task written the
        model's own values keeps them until PanDA's re-measurement after 5 jobs,
        unless a scouts-valued target shares it: PanDA re-measures a task whole,
        and the price tuning chose that target's scouts' value for replaying as
        the scouts do, which it does only when re-measured after 3 (the tuning
        sizes the other targets for it, ``cost_tuning.choose_price``).
        """
        early = (np.asarray(decision) == APPLIED) & as_scouts
        return {"early_remeasure": early & self.settings.early_remeasure}

    @staticmethod
    def _decide_one(
        costs: list[float], scouts: np.ndarray, in_domain: bool, names: list[str]
    ) -> dict[str, np.ndarray] | None:
        """Return :meth:`decide_table`'s task columns for one task, on plain
        floats with the array route's bits (None where a cost is NaN: numpy's
        argmax takes the NaN, so the array route answers)."""
        if any(math.isnan(c) for c in costs):
            return None
        total = row_math.row_sum(costs)
        if not in_domain:
            kind = OUTSIDE_DOMAIN
        else:
            kind = CHEAPER if total <= float(scouts[0]) else COSTS_MORE
        return {
            "decision": np.array(
                [APPLIED if kind != COSTS_MORE else KEPT_SCOUTS], dtype=object
            ),
            "reason_kind": np.array([kind], dtype=object),
            "total_cost": np.array([total]),
            "scouts_cost": scouts,
            "costliest_target": np.array([names[row_math.argmax(costs)]], dtype=object),
        }

    def _checked(
        self,
        distribution: Mapping[str, Any],
        fallback_class: Mapping[str, Any],
        in_domain: Any,
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Return :meth:`decide_table`'s distributions and domain flags as arrays,
        or raise what is wrong with them."""
        names = list(distribution)
        if not names or set(fallback_class) != set(names):
            raise ValueError(
                "The 'distribution' and 'fallback_class' fields must name the same, "
                f"non-empty set of targets. Got {sorted(distribution)} and "
                f"{sorted(fallback_class)} instead."
            )
        missing = [t for t in names if t not in self.choosers]
        if missing:
            raise ValueError(
                f"The policy must have a cost choice for every target. Missing "
                f"{missing}; it has {sorted(self.choosers)}."
            )
        probs = {t: np.asarray(distribution[t], dtype=float) for t in names}
        n = probs[names[0]].shape[0]
        if any(p.ndim != 2 or p.shape[0] != n for p in probs.values()):
            raise ValueError(
                "Every target's distribution must be an (n, K) array for the same n. "
                f"Got shapes {[p.shape for p in probs.values()]} instead."
            )
        dom = np.ones(n, bool) if in_domain is None else np.asarray(in_domain, bool)
        if dom.shape != (n,):
            raise ValueError(
                f"The 'in_domain' field must have one flag per task ({n}). "
                f"Got shape {dom.shape} instead."
            )
        return probs, dom

    def to_dict(self) -> dict[str, Any]:
        """Return the policy's prices as plain values."""
        return self.settings.to_dict()


def _as_scouts_would(sized: Sizing, unfamiliar: np.ndarray, request: Any) -> None:
    """Size the ``unfamiliar`` tasks as their scouts would, in place.

    An unfamiliar task's distribution says little, and a target whose training
    found no price better than the scouts' own first value
    (:attr:`CostSettings.scouts_value_targets`, every task flagged) trusts none:
    it asks for what its scouts would (its request, else the default), at the
    scouts' cost.

    :param sized: one target's :meth:`CostChooser.choose` answer.
    :param request: (n,) the target's requests (None: none given).
    """
    sized.value = np.where(unfamiliar, sized.default, sized.value)
    sized.expected_cost = np.where(unfamiliar, sized.scouts_cost, sized.expected_cost)
    sized.p_short = np.where(unfamiliar, sized.default_p_short, sized.p_short)
    if request is None:
        given = np.zeros(unfamiliar.size, bool)
    else:
        values = np.asarray(request, dtype=float)
        given = np.isfinite(values) & (values > 0)
    sized.from_request = np.where(unfamiliar, given, sized.from_request)


def reason_of(
    table: Mapping[str, Any], i: int, targets: Sequence[str], delay_price: float
) -> str:
    """Return the sentence for row ``i`` of :meth:`CostPolicy.decide_table`."""
    kind = table["reason_kind"][i]
    if kind == OUTSIDE_DOMAIN:
        return (
            "outside training domain (unknown transformation and framework): "
            "starts at once with what its scouts would ask for (its requests, else "
            "the defaults); PanDA measures it after 5 jobs"
        )
    total, scouts = float(table["total_cost"][i]), float(table["scouts_cost"][i])
    parts = ", ".join(
        f"{t} {number(float(table[f'{t}_cost'][i]), None)}"
        for t in targets
        if float(table[f"{t}_cost"][i]) > 0
    )
    op = "<=" if kind == CHEAPER else ">"
    head = "cheaper than scouts" if kind == CHEAPER else "scouts cost less"
    said = compared("expected cost", total, op, scouts)
    tail = f": {parts}" if parts else ""
    delay = number(delay_price, None)
    return (
        f"{head}: {said} job runs (scouts: first jobs at the default plus "
        f"{delay} of delay){tail}"
    )
