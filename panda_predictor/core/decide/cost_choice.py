"""Size a task by expected cost, and keep its scouts only where skipping costs more.

The models give, per task and target, a calibrated distribution over the target's
classes. Inside each class the use is spread the way the training tasks of that
class were spread (:class:`~panda_predictor.core.decide.use_table.UseTable`, a
few quantiles per class). Together they give
a distribution of the task's use, and for every value we could write, what it is
expected to cost under what PanDA does next:

- **too little time** (``walltime``, ``cputime``): the attempt runs until its limit
  and is lost, the job is delayed by it, and it is retried one class up (above the
  top class: twice the value) until it fits;
- **too little memory** (``ramcount``): the attempt runs its course and is lost
  (an upper bound: logs do not say when memory ran out), the job is delayed by it,
  and the retry asks for PanDA's next ``increase_memory`` step;
- **too much**: the unused part is wasted.

Costs are counted in *job runs*: one unit is the core-hours the job needs when it
gets exactly what it uses. A time value v for a job that uses u wastes
``(v - u) / E[u]`` units; memory converts GB-hours at :attr:`CostSettings.gb_per_core`
GB per core (a slot's memory), so ``(v - u) / (gb_per_core * 1024)`` units per MB
per core. A job's delay is priced by one setting, :attr:`CostSettings.delay_price`:
the core-hours that one core-hour of waiting is worth. A failed attempt costs its
own hours plus the delay they cause (``1 + delay_price`` times its length), plus
the wait of its retry in the queue again, taken as
:attr:`CostSettings.requeue_runs` job runs of delay (``delay_price *
requeue_runs``).

The value written is the candidate with the lowest expected cost. Candidates are
the class values, some of the quantiles of every class (:func:`candidate_points`),
the default, and the task's request where it has one. The written value never
exceeds the request: a job cannot use more than it asked for (its batch system
kills it there), so use above the request is counted as use *of* the request when
the request itself is priced.

The scouts are kept where skipping them is expected to cost more than running
them. Running them costs their own first jobs, which ask for the default (the
task's request; without one, for memory the queue's default of
:data:`DEFAULT_RAM_MB_PER_CORE`, for time the top class's value, since no limit is
set), and the bulk's wait for them, one
job run: ``delay_price`` units per job. Skipping costs the first jobs at the
written value. After either, PanDA re-measures the task from its finished jobs
(after 5 and after 100), so the rest of the task costs the same both ways (where
training chose to write a target ``...Fixed``, :attr:`CostSettings.fixed_targets`,
the rest keeps the written value; its validation replay, not this comparison,
judged that cheaper). A task
skips its scouts when the summed expected cost of its written values is at most
the scouts' (:class:`~panda_predictor.core.decide.scout_policy.CostPolicy`). Since the
default is itself a candidate, that holds for every task whose expected costs
can be priced: an uncertain target gets a safer value (the request, at worst);
it does not send the task back to scouts.
``iointensity`` is priced at zero (a wrong I/O class moves a job to another site,
it does not fail it).

The delay price also makes a failure dearer (a failed attempt delays its job), so
it sets how careful the values are. Training chooses one per priced target on its
validation part (:attr:`CostSettings.target_prices`; the replay against the scouts
in :mod:`pipelines.training.cost_tuning`), or, where no price did better than the
scouts' own first value, has the target write that value
(:attr:`CostSettings.scouts_value_targets`, applied by
:class:`~panda_predictor.core.decide.scout_policy.CostPolicy`); an operator's
setting replaces them all.

Pure numpy; one matrix product per target and batch, so a single task takes
microseconds (docs/performance.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from panda_predictor.core.decide.use_table import UseTable
from panda_predictor.core.domain.memory_steps import MEMORY_STEPS_MB

#: How a wrong value of each target costs (module doc). ``None``: not priced.
TIME = "time"
MEMORY = "memory"
#: Targets PanDA lets a written value keep through its re-measurement: a
#: ``MBPerCoreFixed`` ramCount is read from JEDI_TASKS; a Fixed cpuTime unit only
#: from the task parameters (:func:`panda_predictor.core.domain.units.database_value`).
FIXABLE_TARGETS: tuple[str, ...] = ("ramcount",)
KIND_OF: dict[str, str | None] = {
    "walltime": TIME,
    "cputime": TIME,
    "ramcount": MEMORY,
    "iointensity": None,
}
#: What a job asks for without a memory request: a PanDA task without ramCount
#: gets its queue's default, 2000 MB per core on WLCG sites (the scouts' too).
DEFAULT_RAM_MB_PER_CORE = 2000.0
#: Attempts priced per job: retries go on until the job fits (one class up, then
#: doubling), which this many attempts always reach for the values priced here.
MAX_ATTEMPTS = 12
#: Slot memory per core, GB (the WLCG standard slot: 2 GB per core).
DEFAULT_GB_PER_CORE = 2.0
#: Job runs a retried job waits in the queue again: about one (an assumption; a
#: grid job's queue wait is of the order of its run).
DEFAULT_REQUEUE_RUNS = 1.0
#: Candidate delay prices tried per deployment (core-hours per core-hour of delay).
DELAY_PRICES: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


#: Candidate values taken from each class's use table: this many of its quantiles,
#: evenly spread, and its top one. Every candidate is still priced over all the
#: table's points; fewer candidates keep one task's choice as fast as with the
#: coarser tables before (docs/performance.md).
CANDIDATE_POINTS = 20


def candidate_points(points: np.ndarray) -> np.ndarray:
    """Return the columns of a K x Q use table that become candidate values.

    With Q = :data:`CANDIDATE_POINTS` (the tables bundled before) all of them;
    with more, every (Q // CANDIDATE_POINTS)-th from the middle of the first step
    (the same quantiles as the coarser table) and the top one.
    """
    width = points.shape[1]
    step = max(1, width // CANDIDATE_POINTS)
    columns = np.unique(np.append(np.arange(step // 2, width, step), width - 1))
    return points[:, columns]


def _check_number(name: str, value: Any, low: float, high: float = math.inf) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not low <= value <= high
    ):
        raise ValueError(
            f"The '{name}' field must be a number in [{low:g}, {high:g}]. "
            f"Got {value!r} instead."
        )
    return float(value)


@dataclass(frozen=True)
class CostSettings:
    """What a delay and a failure are worth (module doc), in job runs.

    :param delay_price: core-hours that one core-hour of a job's delay is worth.
    :param gb_per_core: GB of memory that one core-hour of a slot comes with.
    :param requeue_runs: job runs a retried job waits in the queue again.
    :param target_prices: per target, the delay price its values are chosen with,
        where it differs from ``delay_price`` (training tunes one per target:
        :mod:`pipelines.training.cost_tuning`); ``(target, price)`` pairs.
    :param fixed_targets: targets whose values are written in PanDA's
        ``...Fixed`` unit, so that PanDA's re-measurement after 5 and 100 finished
        jobs keeps them (only those of :data:`FIXABLE_TARGETS`). Training chooses
        this per deployment with the prices; the ``fixed_units`` setting
        overrides it when set.
    :param scouts_value_targets: targets that write what their scouts would ask
        for (the request, else :attr:`CostChooser.default_value`) instead of a
        priced value: training chooses this where, on its validation part, no
        price's values fared better against the scouts than the scouts' own first
        value (:mod:`pipelines.training.cost_tuning`). The task still starts at
        once. An operator's ``delay_price`` setting replaces it with that price.
    :param early_remeasure: a task written its scouts' own first values, or
        beside a target in ``scouts_value_targets``, is re-measured once its
        first 3 jobs are settled, as its scouts would have been (the decision's
        ``early_remeasure`` column, ``CostPolicy._early``; the hook asks PanDA,
        :mod:`panda_predictor.db.early_remeasure`). Set by training from the
        ``early_remeasure`` setting (at "auto" chosen on the validation part
        with the prices); off (the default), PanDA re-measures such a task
        after 5.
    """

    delay_price: float = 1.0
    gb_per_core: float = DEFAULT_GB_PER_CORE
    requeue_runs: float = DEFAULT_REQUEUE_RUNS
    target_prices: tuple[tuple[str, float], ...] = ()
    fixed_targets: tuple[str, ...] = ()
    scouts_value_targets: tuple[str, ...] = ()
    early_remeasure: bool = False

    def __post_init__(self) -> None:
        _check_number("delay_price", self.delay_price, 0.0)
        if not isinstance(self.early_remeasure, bool):
            raise ValueError(
                "The 'early_remeasure' field must be true or false. "
                f"Got {self.early_remeasure!r} instead."
            )
        _check_number("gb_per_core", self.gb_per_core, 1e-6)
        _check_number("requeue_runs", self.requeue_runs, 0.0)
        for pair in self.target_prices:
            if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] in KIND_OF):
                raise ValueError(
                    "The 'target_prices' field must hold (target, price) pairs with "
                    f"a target of {sorted(KIND_OF)}. Got {pair!r} instead."
                )
            _check_number(f"target_prices.{pair[0]}", pair[1], 0.0)
        wrong = [t for t in self.fixed_targets if t not in FIXABLE_TARGETS]
        if not isinstance(self.fixed_targets, tuple) or wrong:
            raise ValueError(
                "The 'fixed_targets' field must be a tuple of targets among "
                f"{list(FIXABLE_TARGETS)}. Got {self.fixed_targets!r} instead."
            )
        priced = [t for t, kind in KIND_OF.items() if kind is not None]
        wrong = [t for t in self.scouts_value_targets if t not in priced]
        if not isinstance(self.scouts_value_targets, tuple) or wrong:
            raise ValueError(
                "The 'scouts_value_targets' field must be a tuple of targets among "
                f"{priced}. Got {self.scouts_value_targets!r} instead."
            )

    @property
    def failure_cost(self) -> float:
        """Return what a failed attempt costs beyond its own hours: its retry's
        wait in the queue, in job runs."""
        return self.delay_price * self.requeue_runs

    def for_target(self, target: str) -> CostSettings:
        """Return the settings ``target``'s values are chosen with (its own price,
        and whether it writes its scouts' value)."""
        price = dict(self.target_prices).get(target)
        return replace(
            self,
            delay_price=self.delay_price if price is None else float(price),
            target_prices=(),
            scouts_value_targets=tuple(
                t for t in self.scouts_value_targets if t == target
            ),
        )

    def with_price(self, delay_price: float) -> CostSettings:
        """Return these settings with one ``delay_price`` for every target (an
        operator's setting wins over the prices and the scouts' values training
        chose per target)."""
        return replace(
            self,
            delay_price=float(delay_price),
            target_prices=(),
            scouts_value_targets=(),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the settings as plain values."""
        out: dict[str, Any] = {
            "delay_price": self.delay_price,
            "gb_per_core": self.gb_per_core,
            "requeue_runs": self.requeue_runs,
        }
        if self.target_prices:
            out["target_prices"] = dict(self.target_prices)
        if self.fixed_targets:
            out["fixed_targets"] = list(self.fixed_targets)
        if self.scouts_value_targets:
            out["scouts_value_targets"] = list(self.scouts_value_targets)
        if self.early_remeasure:
            out["early_remeasure"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostSettings:
        """Rebuild the settings from :meth:`to_dict` output."""
        lists = {"target_prices", "fixed_targets", "scouts_value_targets"}
        flags = {"early_remeasure"}
        known = {"delay_price", "gb_per_core", "requeue_runs", *lists, *flags}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"The cost settings must have only {sorted(known)}. Got "
                f"unexpected {unknown} instead."
            )
        prices = data.get("target_prices") or {}
        if not isinstance(prices, Mapping):
            raise ValueError(
                "The 'target_prices' field must be a mapping of target to price. "
                f"Got {prices!r:.200} instead."
            )
        early = data.get("early_remeasure", False)
        if not isinstance(early, bool):
            raise ValueError(
                "The 'early_remeasure' field must be true or false. "
                f"Got {early!r:.200} instead."
            )
        return cls(
            **{k: float(v) for k, v in data.items() if k not in lists | flags},
            early_remeasure=early,
            target_prices=tuple((str(t), float(v)) for t, v in prices.items()),
            fixed_targets=_targets(data, "fixed_targets"),
            scouts_value_targets=_targets(data, "scouts_value_targets"),
        )


def _targets(data: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """Return the list of targets ``data[name]`` as a tuple (absent: none)."""
    targets = data.get(name) or []
    if isinstance(targets, str) or not isinstance(targets, Sequence):
        raise ValueError(
            f"The '{name}' field must be a list of targets. "
            f"Got {targets!r:.200} instead."
        )
    return tuple(str(t) for t in targets)


@dataclass
class Sizing:
    """The cost choice for a batch of tasks, one target.

    ``value`` the value to write (the target's unit), ``expected_cost`` its
    expected cost in job runs, ``p_short`` the probability that it is too little
    (the job fails at least once), ``from_request`` whether the request was chosen,
    ``scouts_cost`` the expected cost of a scout job asking for the default (the
    request, else :attr:`CostChooser.default_value`), ``default`` that value and
    ``default_p_short`` the probability that it is too little (0 for a request).
    """

    value: np.ndarray
    expected_cost: np.ndarray
    p_short: np.ndarray
    from_request: np.ndarray
    scouts_cost: np.ndarray
    default: np.ndarray
    default_p_short: np.ndarray


def _retry_value(kind: str, value: np.ndarray, ladder: np.ndarray) -> np.ndarray:
    """Return what a failed attempt of ``value`` is retried with."""
    if kind == MEMORY:
        steps = np.asarray(MEMORY_STEPS_MB)
        idx = np.searchsorted(steps, value, side="right")
        above = steps[np.minimum(idx, steps.size - 1)]
        # Past PanDA's top step PanDA gives nothing more; price it as a doubling
        # (the job is lost and the task resubmitted with more).
        return np.where(idx >= steps.size, value * 2.0, above)
    idx = np.searchsorted(ladder, value, side="right")
    top = idx >= ladder.size
    return np.where(top, value * 2.0, ladder[np.minimum(idx, ladder.size - 1)])


def job_cost(
    kind: str,
    value: Any,
    use: Any,
    scale: Any,
    ladder: Any,
    settings: CostSettings,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (cost in job runs, failed attempts) of writing ``value`` for ``use``.

    ``scale`` is one job run in the target's unit for time (the expected use); for
    memory it is ignored (one run is the slot's memory, ``gb_per_core * 1024`` MB
    per core). The cost leaves out :attr:`CostSettings.failure_cost`, which the
    caller adds per failed attempt. Arrays broadcast.
    """
    value = np.asarray(value, dtype=float)
    use = np.asarray(use, dtype=float)
    value, use = np.broadcast_arrays(value, use)
    ladder = np.asarray(ladder, dtype=float)
    per_unit = (
        1.0 / (settings.gb_per_core * 1024.0)
        if kind == MEMORY
        else 1.0 / np.maximum(np.asarray(scale, dtype=float), 1e-12)
    )
    delay = 1.0 + settings.delay_price
    cost = np.zeros(value.shape)
    failures = np.zeros(value.shape)
    request = value.copy()
    open_ = np.ones(value.shape, dtype=bool)
    for attempt in range(MAX_ATTEMPTS):
        short = open_ & (request < use)
        fits = open_ & ~short
        cost = cost + np.where(fits, (request - use) * per_unit, 0.0)
        # A failed time attempt runs until its limit; a failed memory attempt runs
        # its course (one job run) holding its slot, or more memory than a slot.
        if kind == MEMORY:
            lost = delay * np.maximum(1.0, request * per_unit)
        else:
            lost = delay * request * per_unit
        cost = cost + np.where(short, lost, 0.0)
        failures = failures + short
        open_ = short
        if attempt < MAX_ATTEMPTS - 1:
            request = np.where(short, _retry_value(kind, request, ladder), request)
    # A job still short after MAX_ATTEMPTS (more than 2**6 times above the top
    # class) is priced as getting its use at last.
    return cost, failures


class CostChooser:
    """The expected-cost choice of one target, precomputed for its classes.

    :param target: the target's name (its kind comes from :data:`KIND_OF`).
    :param table: the use spread per class.
    :param ladder: ascending class values (time retries go one class up).
    :param settings: the prices.
    """

    def __init__(
        self,
        target: str,
        table: UseTable,
        ladder: Sequence[float],
        settings: CostSettings,
    ) -> None:
        if target not in KIND_OF:
            raise ValueError(
                f"The 'target' field must be one of {sorted(KIND_OF)}. "
                f"Got {target!r} instead."
            )
        self.target = target
        self.kind = KIND_OF[target]
        self.settings = settings
        #: Whether the target writes what its scouts would ask for instead of
        #: its cheapest value (:attr:`CostSettings.scouts_value_targets`).
        self.writes_scouts_value = target in settings.scouts_value_targets
        self.points = table.array
        self.ladder = np.sort(np.asarray(ladder, dtype=float))
        if self.points.shape[0] != self.ladder.size:
            raise ValueError(
                f"The use table of {target!r} must have one row per class "
                f"({self.ladder.size}). Got {self.points.shape[0]} instead."
            )
        self.class_mean = self.points.mean(axis=1)
        positive = self.points[self.points > 0]
        #: The shortest job run a time target prices against: the smallest
        #: positive use in the table (1 unit if it has none). A task whose
        #: expected use is 0 would otherwise count its costs in runs of nothing.
        self.shortest_run = float(positive.min()) if positive.size else 1.0
        #: What a task without a request (and its scouts) asks for: for memory
        #: the queue's default, for time the top class's value (no limit set).
        self.default_value = (
            DEFAULT_RAM_MB_PER_CORE if self.kind == MEMORY else float(self.ladder[-1])
        )
        grid = np.unique(
            np.concatenate(
                [
                    candidate_points(self.points).ravel(),
                    self.ladder,
                    [self.default_value],
                ]
            )
        )
        self.candidates = grid[grid > 0] if np.any(grid > 0) else grid
        self._default = int(np.searchsorted(self.candidates, self.default_value))
        if self.kind is not None:
            # cost[k, j]: mean cost of candidate j over class k's points, for time in
            # the target's own unit (divided by the task's scale in choose).
            cost, failures = job_cost(
                self.kind,
                self.candidates[None, None, :],
                self.points[:, :, None],
                1.0,
                self.ladder,
                settings,
            )
            self.cost = cost.mean(axis=1)
            self.failures = failures.mean(axis=1)
            self.short = (self.points[:, :, None] > self.candidates).mean(axis=1)
            # The per-candidate tables and the class means side by side: one
            # weighting per call.
            self._tables = np.concatenate(
                [self.cost, self.failures, self.short, self.class_mean[:, None]], 1
            )

    def choose(
        self,
        distribution: np.ndarray,
        request: Any = None,
        fallback_class: Any = None,
    ) -> Sizing:
        """Return the cheapest value per task (rows of ``distribution`` sum to 1).

        :param request: (n,) the task's request in the target's unit (NaN or <= 0:
            none); the value never exceeds it and it is a candidate itself.
        :param fallback_class: (n,) for an unpriced target, the class to write
            (the tail rule's or the combination's choice).
        """
        p = np.asarray(distribution, dtype=float)
        n = p.shape[0]
        if n > CHOOSE_ROWS and self.kind is not None:
            return self._choose_in_parts(p, request, fallback_class)
        if n == 1 and self.kind is not None:
            req_one = np.asarray(math.nan if request is None else request, dtype=float)
            expected, short, per_scale = self.priced(p)
            return self._choose_one(
                p, expected[0], short[0], per_scale, float(req_one.reshape(1)[0])
            )
        if request is None:
            req, has_req = np.full(n, np.nan), np.zeros(n, dtype=bool)
        else:
            req = np.asarray(request, dtype=float).reshape(n)
            has_req = np.isfinite(req) & (req > 0)
        # Without a request (the usual task) the request steps are skipped: they
        # would leave every value as it is.
        any_request = bool(has_req.any())
        rows = np.arange(n)
        if self.kind is None:
            cls = (
                p.argmax(axis=1)
                if fallback_class is None
                else np.asarray(fallback_class, dtype=int)
            )
            value = self.ladder[cls]
            if any_request:
                value = np.where(
                    has_req, np.minimum(value, np.where(has_req, req, 0)), value
                )
            short = 1.0 - np.cumsum(p, axis=1)[rows, cls]
            zero = np.zeros(n)
            return Sizing(
                value, zero, short, np.zeros(n, dtype=bool), zero, value, zero
            )
        expected, short, per_scale = self.priced(p)
        if any_request:
            # The request caps the value: candidates above it are not allowed.
            allowed = ~has_req[:, None] | (self.candidates[None, :] <= req[:, None])
            expected = np.where(allowed, expected, np.inf)
        # Without a request the scouts ask for the default value.
        scouts = expected[:, self._default].copy()
        best = expected.argmin(axis=1)
        value = self.candidates[best]
        cost = expected[rows, best]
        p_short = short[rows, best]
        default = np.where(has_req, req, self.default_value)
        default_p_short = np.where(has_req, 0.0, short[:, self._default])
        from_request = np.zeros(n, dtype=bool)
        if any_request:
            r_cost = self._request_cost(p[has_req], req[has_req], per_scale[has_req])
            scouts[has_req] = r_cost
            better = r_cost < cost[has_req]
            idx = np.flatnonzero(has_req)[better]
            value[idx] = req[idx]
            cost[idx] = r_cost[better]
            p_short[idx] = 0.0
            from_request[idx] = True
        return Sizing(
            value, cost, p_short, from_request, scouts, default, default_p_short
        )

    def _choose_in_parts(
        self, p: np.ndarray, request: Any, fallback_class: Any
    ) -> Sizing:
        """Return :meth:`choose` of a large batch, :data:`CHOOSE_ROWS` tasks at a
        time: every step is row by row, so the answer is the same, and the
        candidates' cost matrices stay small (a whole 100,000-task batch made
        several of 200 MB each)."""
        n = p.shape[0]
        req = None if request is None else np.asarray(request, dtype=float).reshape(n)
        fallback = None if fallback_class is None else np.asarray(fallback_class)
        parts = [
            self.choose(
                p[start : start + CHOOSE_ROWS],
                None if req is None else req[start : start + CHOOSE_ROWS],
                None if fallback is None else fallback[start : start + CHOOSE_ROWS],
            )
            for start in range(0, n, CHOOSE_ROWS)
        ]
        return Sizing(
            *(
                np.concatenate([getattr(part, f.name) for part in parts])
                for f in fields(Sizing)
            )
        )

    def _choose_one(
        self,
        p: np.ndarray,
        expected: np.ndarray,
        short: np.ndarray,
        per_scale: np.ndarray,
        request: float,
    ) -> Sizing:
        """Return :meth:`choose` of one task from its priced candidates: the same
        steps on scalars (one task's service pays numpy's dispatch per step)."""
        has_req = math.isfinite(request) and request > 0
        if has_req:
            expected = np.where(self.candidates <= request, expected, np.inf)
        best = int(expected.argmin())
        value, cost, p_short = (
            float(self.candidates[best]),
            float(expected[best]),
            float(short[best]),
        )
        scouts = float(expected[self._default])
        default, default_p_short = self.default_value, float(short[self._default])
        from_request = False
        if has_req:
            default, default_p_short = request, 0.0
            r_cost = float(self._request_cost(p, np.array([request]), per_scale)[0])
            scouts = r_cost
            if r_cost < cost:
                value, cost, p_short, from_request = request, r_cost, 0.0, True
        return Sizing(
            np.array([value]),
            np.array([cost]),
            np.array([p_short]),
            np.array([from_request]),
            np.array([scouts]),
            np.array([float(default)]),
            np.array([default_p_short]),
        )

    def priced(self, distribution: np.ndarray) -> tuple[np.ndarray, ...]:
        """Return what every candidate is expected to cost, before any request.

        Returns ``(expected, p_short, scale)``: (n, C) expected costs in job runs
        of the :attr:`candidates` (failure costs included), (n, C) the probability
        that each is too little, and (n,) one job run in the target's unit. Only
        for a priced target. :meth:`choose` takes the cheapest allowed column.
        """
        if self.kind is None:
            raise ValueError(
                f"The target {self.target!r} is not priced: it has no candidate costs."
            )
        p = np.asarray(distribution, dtype=float)
        width = self.candidates.size
        weighted = _weighted(p, self._tables)
        per_scale = self._scale(weighted[:, -1])
        expected = weighted[:, :width] / per_scale[:, None]
        if self.settings.failure_cost:
            failures = weighted[:, width : 2 * width]
            expected = expected + self.settings.failure_cost * failures
        return expected, weighted[:, 2 * width : 3 * width], per_scale

    def _scale(self, expected_use: np.ndarray) -> np.ndarray:
        """Return one job run in the target's unit per task (1 for memory), from
        the tasks' expected use (their distribution weighing the class means).

        A run is never shorter than :attr:`shortest_run`: with the floor at 1e-12
        units, a task sure to use 0 (a first class of value 0, as the demo's
        walltime has) counted writing 5,000 as 5e15 runs, and its skip-or-scout
        sum then rounded every other target's cost to whole runs
        (docs/decisions.md, "Sizing by expected cost").
        """
        if self.kind == MEMORY:
            return np.ones(expected_use.shape[0])
        return np.maximum(expected_use, self.shortest_run)

    def _request_cost(
        self, p: np.ndarray, request: np.ndarray, scale: np.ndarray
    ) -> np.ndarray:
        """Return the expected cost of writing the request itself (never short)."""
        spare = np.maximum(request[:, None, None] - self.points[None, :, :], 0.0)
        per_class = spare.mean(axis=2)
        if self.kind == MEMORY:
            per_unit = 1.0 / (self.settings.gb_per_core * 1024.0)
            return (p * per_class).sum(axis=1) * per_unit
        return (p * per_class).sum(axis=1) / scale


#: Tasks per part of a large batch's :meth:`CostChooser.choose` (its cost
#: matrices, tasks x candidates, then stay a few MB; measured on 100,000 tasks).
CHOOSE_ROWS = 4096

#: Rows per block of :func:`_weighted`: the block's partial sums stay in the
#: cache (measured on 100k tasks: as fast as the BLAS product it replaces).
_BLOCK_ROWS = 1024


def _weighted(p: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Return ``p @ table``, summed over the classes one after another.

    A BLAS product picks its kernel (and so its rounding) by the matrix sizes:
    one task alone and the same task in a batch got expected costs that differed
    in the last bits, which at a near tie could change the value written. Here
    every row is ``((p0 * t0 + p1 * t1) + p2 * t2) + ...`` in this order, the
    same bits however many rows come with it.
    """
    if len(p) == 1:
        # One task: the same products and sums, without the block's slicing.
        weights = p[0].tolist()
        one = table[0] * weights[0]
        for k in range(1, table.shape[0]):
            one += table[k] * weights[k]
        return one[None, :]
    out = np.empty((len(p), table.shape[1]))
    for start in range(0, len(p), _BLOCK_ROWS):
        rows = p[start : start + _BLOCK_ROWS]
        block = out[start : start + _BLOCK_ROWS]
        np.multiply(rows[:, :1], table[0], out=block)
        for k in range(1, table.shape[0]):
            block += rows[:, k : k + 1] * table[k]
    return out
