"""Calibrate class probabilities so that a stated 0.8 is right eight times in ten.

The served distribution of a target (:func:`served_mixture`: the model's
probabilities, or a mix with the class of the recency rule the combination follows)
is what the scout decision reads; a calibrator fitted on the validation part maps it
to one whose probabilities match the observed frequencies. Three methods are
compared (see docs/models.md, "Calibration"):

* ``none``: the identity (also what an old bundle without a calibrator loads as);
* ``temperature``: one temperature on the log-probabilities, fitted by NLL with a
  bounded 1-D search (Guo et al., ICML 2017). It keeps each row's class ranking and
  has one parameter, so it is stable on small validation parts;
* ``isotonic``: one-vs-rest isotonic regression per class (Zadrozny and Elkan, KDD
  2002), renormalised; more flexible, but it may reorder classes;
* ``top_isotonic``: isotonic regression of the most likely class's probability on
  its hits (top-label calibration, Gupta and Ramdas, ICLR 2022), the other classes
  sharing the rest in proportion;
* ``<method>+expert``: one map for the rows that follow the model, one for those
  that follow a recency rule (:class:`ByExpertCalibrator`).

A single temperature cannot serve both kinds of row: a followed rule's recent
accuracy overstates its next hit (it is the best of several experts' records), so
its near-one-hot mixture is over-confident where the model's own rows are not.
The default, ``top_isotonic+expert``, had the lowest worst-case ECE over the
targets and logs measured.

How well a distribution is calibrated is measured in
:mod:`panda_predictor.core.assess.calibration_error`.

Pure numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from panda_predictor.core.decide import row_math
from panda_predictor.core.decide.tail_rule import FIT_ON_VALIDATION, _check_proba
from panda_predictor.core.fitted import check_is_fitted
from panda_predictor.core.identity_cache import cached_by_identity

#: The methods :func:`make_calibrator` knows, in the order they are compared.
METHODS: tuple[str, ...] = (
    "none",
    "temperature",
    "isotonic",
    "top_isotonic",
    "temperature+expert",
    "isotonic+expert",
    "top_isotonic+expert",
)
#: The method every target uses (chosen by worst-case ECE, docs/models.md).
DEFAULT_METHOD = "top_isotonic+expert"
#: Probabilities are floored here before taking logs.
EPS = 1e-12
#: Pseudo-count of the top-label calibrator's rest weights (per class, on both
#: sides of the ratio), so a class rarely seen on the validation part keeps a
#: weight near 1 rather than 0 or a large number.
REST_PSEUDO_COUNT = 1.0
#: Bounds of the temperature search (log-spaced golden section).
T_BOUNDS = (0.05, 20.0)


def check_labels(y: Any, n: int, n_classes: int) -> np.ndarray:
    """Return ``y`` as ``n`` class indices in ``0..n_classes - 1``, or raise what
    is wrong with it."""
    arr = np.asarray(y)
    if arr.shape != (n,):
        raise ValueError(
            f"The 'y' field must be a 1-D array of {n} class labels. "
            f"Got shape {arr.shape} instead."
        )
    if arr.size and (arr.min() < 0 or arr.max() >= n_classes):
        raise ValueError(
            f"The 'y' field must hold classes in 0..{n_classes - 1}. "
            f"Got values from {arr.min()} to {arr.max()} instead."
        )
    return arr.astype(np.int64)


def _normalised(arr: np.ndarray) -> np.ndarray:
    """Return rows scaled to sum to 1 (a zero row becomes uniform)."""
    total = np.add.reduce(arr, axis=1, keepdims=True)
    if np.logical_and.reduce(total > 0, axis=None):  # the usual case, 3 steps not 6
        return arr / total
    uniform = np.full_like(arr, 1.0 / arr.shape[1])
    return np.where(total > 0, arr / np.where(total > 0, total, 1.0), uniform)


def served_mixture(
    proba: np.ndarray,
    classes: np.ndarray,
    followed: np.ndarray | None = None,
    accuracy: np.ndarray | None = None,
) -> np.ndarray:
    """Return the served distribution: the model's, or mixed with a followed rule.

    Where the followed expert is the model (index 0, or no combination: ``followed``
    None or -1) the row is the model's probabilities; where it is a rule with class
    ``c`` and recent weighted accuracy ``w``, it is ``w * onehot(c) + (1 - w) *
    proba``.

    :param proba: (n, K) model probabilities.
    :param classes: (n,) the served classes (the followed expert's).
    :param followed: (n,) index into the experts (0: the model), or None.
    :param accuracy: (n,) the followed expert's recent weighted accuracy in [0, 1].
    """
    p = _check_proba(proba)
    if followed is None or len(followed) == 0:
        return p.copy()
    return _mixture(p, classes, np.asarray(followed) > 0, accuracy)


def _mixture(
    p: np.ndarray, classes: Any, rule: np.ndarray, accuracy: Any
) -> np.ndarray:
    """Return :func:`served_mixture` of checked probabilities; ``rule`` marks the
    rows that follow a rule."""
    if accuracy is None or not rule.any():  # w = 0 leaves every row as it is
        return p.copy()
    w = np.where(rule, np.clip(np.asarray(accuracy, dtype=np.float64), 0.0, 1.0), 0.0)
    out = (1.0 - w)[:, None] * p
    rows = np.flatnonzero(rule)
    out[rows, np.asarray(classes, dtype=np.int64)[rows]] += w[rows]
    return out


def calibrated_mixture(
    calibrator: Calibrator,
    proba: Any,
    classes: Any,
    followed: Any = None,
    accuracy: Any = None,
) -> np.ndarray:
    """Return the calibrated served distribution of the model's probabilities.

    ``calibrator.transform(served_mixture(proba, classes, followed, accuracy),
    followed)``, with its input checked once: what the decision prices, for
    every route.
    """
    p = _check_proba(proba, calibrator._classes_in())
    rule = _rule_rows(followed, p.shape[0])
    if p.shape[0] == 1 and p.shape[1] < row_math.EXACT_SUM_BELOW:
        # One task (the service's, the hook's single submissions): the same
        # arithmetic on Python floats, a tenth of the numpy calls' cost.
        row = _mixture_row(p, classes, bool(rule[0]), accuracy)
        out = calibrator._transform_row(row, bool(rule[0]))
        if out is not None:
            return np.array([out])
    return calibrator._transform(_mixture(p, classes, rule, accuracy), rule)


def _mixture_row(p: np.ndarray, classes: Any, rule: bool, accuracy: Any) -> list[float]:
    """Return :func:`_mixture` of a checked one-row ``p`` as a list (its bits)."""
    row = p[0].tolist()
    if accuracy is None or not rule:
        return row
    w = min(max(float(np.asarray(accuracy, dtype=np.float64).reshape(-1)[0]), 0.0), 1.0)
    out = [(1.0 - w) * value for value in row]
    out[int(np.asarray(classes).reshape(-1)[0])] += w
    return out


class Calibrator:
    """Base of the multi-class calibrators: ``fit`` on (proba, y), ``transform``.

    ``transform`` maps (n, K) probabilities to (n, K) rows summing to 1;
    ``to_dict`` / :func:`calibrator_from_dict` store and rebuild a fitted one.
    """

    method: ClassVar[str] = ""

    def fit(self, proba: Any, y: Any, followed: Any = None) -> Calibrator:
        """Learn the map from validation probabilities and true classes.

        ``followed`` (n,) is the expert each row followed (0: the model; None:
        no combination); only :class:`ByExpertCalibrator` reads it.
        """
        p = _check_proba(proba)
        labels = check_labels(y, p.shape[0], p.shape[1])
        self.n_classes_ = p.shape[1]
        self._fit(p, labels, _rule_rows(followed, p.shape[0]))
        return self

    def _fit(self, proba: np.ndarray, y: np.ndarray, rule: np.ndarray) -> None:
        """Learn from checked inputs (subclasses)."""

    def transform(self, proba: Any, followed: Any = None) -> np.ndarray:
        """Return the calibrated probabilities (rows sum to 1).

        ``followed`` as in :meth:`fit`.
        """
        p = _check_proba(proba, self._classes_in())
        return self._transform(p, _rule_rows(followed, p.shape[0]))

    def _classes_in(self) -> int | None:
        """Return the classes :meth:`transform` takes; raise if not fitted."""
        check_is_fitted(self, "n_classes_", FIT_ON_VALIDATION)
        return int(self.n_classes_)

    def _transform(self, proba: np.ndarray, rule: np.ndarray) -> np.ndarray:
        """Return :meth:`transform` of checked probabilities (``rule``: the rows
        that follow a rule); subclasses apply their map here."""
        return _normalised(proba)

    def _transform_row(self, row: list[float], rule: bool) -> list[float] | None:
        """Return :meth:`_transform` of one row (fewer than
        :data:`~.row_math.EXACT_SUM_BELOW` classes) with the same bits, or None
        where the method has no one-row form (the array route then runs)."""
        return None

    def _state(self) -> dict[str, Any]:
        return {}

    def to_dict(self) -> dict[str, Any]:
        """Return the method and its learned state as JSON-ready values."""
        check_is_fitted(self, "n_classes_", FIT_ON_VALIDATION)
        return {"method": self.method, "n_classes_": self.n_classes_, **self._state()}


class IdentityCalibrator(Calibrator):
    """Leave the probabilities as they are (renormalised): the ``none`` method."""

    method = "none"

    def __init__(self, n_classes: int | None = None) -> None:
        self.n_classes = n_classes
        if n_classes is not None:
            self.n_classes_ = int(n_classes)

    def _classes_in(self) -> int | None:
        """Return the classes :meth:`transform` takes (any number if unset)."""
        return getattr(self, "n_classes_", None)

    def _transform_row(self, row: list[float], rule: bool) -> list[float] | None:
        return row_math.normalised(row)


def _nll(logp: np.ndarray, y: np.ndarray, temperature: float) -> float:
    z = logp / temperature
    z = z - z.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=1))
    return float(np.mean(log_norm - z[np.arange(y.size), y]))


def _golden_min(fn: Any, low: float, high: float, iterations: int = 60) -> float:
    """Return the minimiser of a unimodal ``fn`` on [low, high] (golden section)."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = low, high
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = fn(c), fn(d)
    for _ in range(iterations):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = fn(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = fn(d)
    return (a + b) / 2.0


def _rule_rows(followed: Any, n: int) -> np.ndarray:
    """Return per row whether it followed a recency rule (not the model)."""
    if followed is None or len(followed) == 0:
        return np.zeros(n, dtype=bool)
    arr = np.asarray(followed)
    if arr.shape != (n,):
        raise ValueError(
            f"The 'followed' field must be a 1-D array of {n} expert indices. "
            f"Got shape {arr.shape} instead."
        )
    return arr > 0


class TemperatureCalibrator(Calibrator):
    """Scale the log-probabilities by one temperature: ``softmax(log p / T)``.

    ``T`` minimises the validation NLL, searched on log T within
    :data:`T_BOUNDS`. T > 1 softens an over-confident model, T < 1 sharpens an
    under-confident one; the class ranking of every row is kept.
    """

    method = "temperature"

    def _fit(self, proba: np.ndarray, y: np.ndarray, rule: np.ndarray) -> None:
        if y.size == 0:
            self.temperature_ = 1.0
            return
        logp = np.log(np.maximum(proba, EPS))
        log_t = _golden_min(
            lambda s: _nll(logp, y, math.exp(s)),
            math.log(T_BOUNDS[0]),
            math.log(T_BOUNDS[1]),
        )
        self.temperature_ = float(math.exp(log_t))

    def _transform(self, proba: np.ndarray, rule: np.ndarray) -> np.ndarray:
        z = np.log(np.maximum(proba, EPS)) / self.temperature_
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def _state(self) -> dict[str, Any]:
        return {"temperature_": self.temperature_}


def _knot_arrays(calibrator: Any, per_class: bool) -> Any:
    """Return a calibrator's knots as float arrays, converted once.

    The knots are kept as lists (what ``to_dict`` stores); converting thousands
    of knots on every call would cost more than the interpolation. ``per_class``:
    one (x, y) pair per class (isotonic), else one pair (top-label).
    """
    knots_x, knots_y = calibrator.knots_x_, calibrator.knots_y_

    def arrays() -> Any:
        pairs = (
            zip(knots_x, knots_y, strict=True) if per_class else [(knots_x, knots_y)]
        )
        out = [
            (np.asarray(x, dtype=float), np.asarray(y, dtype=float)) for x, y in pairs
        ]
        return out if per_class else out[0]

    return cached_by_identity(calibrator, "_knot_cache", (knots_x, knots_y), arrays)


def _knot_lists(calibrator: Any) -> Any:
    """Return a top-label calibrator's knots as two lists of floats (made once)."""
    knots_x, knots_y = calibrator.knots_x_, calibrator.knots_y_

    def lists() -> Any:
        return [float(v) for v in knots_x], [float(v) for v in knots_y]

    return cached_by_identity(calibrator, "_knot_list_cache", (knots_x, knots_y), lists)


def _isotonic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the knots (x, fitted y) of the increasing isotonic fit of y on x.

    Pool-adjacent-violators over the points sorted by x (ties pooled first).
    """
    order = np.argsort(x, kind="stable")
    xs, ys = x[order], y[order].astype(np.float64)
    ux, start = np.unique(xs, return_index=True)
    counts = np.diff(np.r_[start, xs.size]).astype(np.float64)
    sums = np.add.reduceat(ys, start)
    # Blocks of pooled points: their sum, count and first/last knot.
    b_sum: list[float] = []
    b_n: list[float] = []
    b_lo: list[int] = []
    for i in range(ux.size):
        b_sum.append(float(sums[i]))
        b_n.append(float(counts[i]))
        b_lo.append(i)
        while len(b_sum) > 1 and b_sum[-2] / b_n[-2] >= b_sum[-1] / b_n[-1]:
            s, n = b_sum.pop(), b_n.pop()
            b_lo.pop()
            b_sum[-1] += s
            b_n[-1] += n
    fitted = np.empty(ux.size)
    bounds = [*b_lo, ux.size]
    for j in range(len(b_lo)):
        fitted[bounds[j] : bounds[j + 1]] = b_sum[j] / b_n[j]
    return ux, fitted


class IsotonicCalibrator(Calibrator):
    """Fit one increasing map per class (one-vs-rest isotonic), then renormalise.

    A class absent from the validation part maps to 0 unless every class is 0 for
    a row, which then keeps its input probabilities.
    """

    method = "isotonic"

    def _fit(self, proba: np.ndarray, y: np.ndarray, rule: np.ndarray) -> None:
        self.knots_x_: list[list[float]] = []
        self.knots_y_: list[list[float]] = []
        for k in range(proba.shape[1]):
            if y.size == 0:
                kx, ky = np.array([0.0, 1.0]), np.array([0.0, 1.0])
            else:
                kx, ky = _isotonic(proba[:, k], (y == k).astype(np.float64))
            self.knots_x_.append(kx.tolist())
            self.knots_y_.append(ky.tolist())

    def _transform(self, proba: np.ndarray, rule: np.ndarray) -> np.ndarray:
        knots = _knot_arrays(self, per_class=True)
        out = np.column_stack(
            [np.interp(proba[:, k], *knots[k]) for k in range(proba.shape[1])]
        )
        empty = out.sum(axis=1) <= 0
        out[empty] = proba[empty]
        return _normalised(out)

    def _state(self) -> dict[str, Any]:
        return {"knots_x_": self.knots_x_, "knots_y_": self.knots_y_}


class TopLabelCalibrator(Calibrator):
    """Map the most likely class's probability by isotonic regression on its hits,
    and share the rest among the other classes as often as they were right.

    Top-label calibration (Gupta and Ramdas, ICLR 2022): the top probability
    becomes the validation hit rate of rows as confident. The rest goes to the
    other classes in proportion to their probabilities times a weight per class,
    ``rest_weights_``: on the validation rows where the class was not the top, how
    often it was the truth over how much probability it got (with one pseudo-count
    each). Class-weighted training gives the rare large classes several times the
    probability they deserve; the cost choice prices every class of the
    distribution, and without these weights it pays for that inflated tail with
    values far above the use (on the demo's history, writing 2.1x the mean use).
    """

    method = "top_isotonic"

    def _fit(self, proba: np.ndarray, y: np.ndarray, rule: np.ndarray) -> None:
        n_classes = proba.shape[1]
        if y.size == 0:
            kx, ky = np.array([0.0, 1.0]), np.array([0.0, 1.0])
            weights = np.ones(n_classes)
        else:
            top = np.argmax(proba, axis=1)
            hit = (top == y).astype(np.float64)
            kx, ky = _isotonic(proba.max(axis=1), hit)
            rest = _normalised(proba)
            rest[np.arange(y.size), top] = 0.0
            seen = np.bincount(y[top != y], minlength=n_classes)
            given = rest.sum(axis=0)
            weights = (seen + REST_PSEUDO_COUNT) / (given + REST_PSEUDO_COUNT)
        self.knots_x_, self.knots_y_ = kx.tolist(), ky.tolist()
        self.rest_weights_ = weights.tolist()

    def _transform(self, proba: np.ndarray, rule: np.ndarray) -> np.ndarray:
        p = _normalised(proba)
        top = p.argmax(axis=1)
        rows = np.arange(p.shape[0])
        new = np.interp(p[rows, top], *_knot_arrays(self, per_class=False))
        # A bundle stored before the weights existed shares in plain proportion.
        weights = getattr(self, "rest_weights_", None)
        out = p * np.asarray(weights) if weights is not None else p.copy()
        out[rows, top] = 0.0
        rest = out.sum(axis=1)
        shared = rest > 0
        if bool(shared.all()):
            out *= ((1.0 - new) / rest)[:, None]
        else:
            # A top row with nothing else to share the rest spreads it evenly.
            out[shared] *= ((1.0 - new[shared]) / rest[shared])[:, None]
            out[~shared] = ((1.0 - new[~shared]) / (p.shape[1] - 1))[:, None]
        out[rows, top] = new
        return _normalised(out)

    def _transform_row(self, row: list[float], rule: bool) -> list[float] | None:
        p = row_math.normalised(row)
        top = row_math.argmax(p)
        knots_x, knots_y = _knot_lists(self)
        new = row_math.interp(p[top], knots_x, knots_y)
        weights = getattr(self, "rest_weights_", None)
        out = (
            [v * w for v, w in zip(p, weights, strict=True)]
            if weights is not None
            else list(p)
        )
        out[top] = 0.0
        rest = row_math.row_sum(out)
        if rest > 0:
            share = (1.0 - new) / rest
            out = [v * share for v in out]
        else:
            out = [(1.0 - new) / (len(p) - 1)] * len(p)
        out[top] = new
        return row_math.normalised(out)

    def _state(self) -> dict[str, Any]:
        state = {"knots_x_": self.knots_x_, "knots_y_": self.knots_y_}
        if getattr(self, "rest_weights_", None) is not None:
            state["rest_weights_"] = self.rest_weights_
        return state


#: Fewest validation rows a group of :class:`ByExpertCalibrator` needs for its own
#: map; a smaller group uses the map fitted on every row.
MIN_GROUP_ROWS = 100


class ByExpertCalibrator(Calibrator):
    """One calibrator of ``base`` for rows that follow the model, one for rules.

    The two kinds of served distribution err differently (a rule's recent
    accuracy overstates how often it is right next time), so each gets its own
    map; a group with fewer than :data:`MIN_GROUP_ROWS` validation rows uses the
    map fitted on all rows.
    """

    def __init__(self, base: str = "isotonic") -> None:
        self.base = base

    @property
    def method(self) -> str:  # type: ignore[override]
        return f"{self.base}+expert"

    def _fit(self, proba: np.ndarray, y: np.ndarray, rule: np.ndarray) -> None:
        every = make_calibrator(self.base).fit(proba, y)
        self.parts_: dict[str, Calibrator] = {}
        for name, rows in (("model", ~rule), ("rule", rule)):
            enough = int(rows.sum()) >= MIN_GROUP_ROWS
            self.parts_[name] = (
                make_calibrator(self.base).fit(proba[rows], y[rows])
                if enough
                else every
            )

    def _transform(self, proba: np.ndarray, rule: np.ndarray) -> np.ndarray:
        # Each row's map is its own (every base map is row by row): run each part
        # on its rows only, so one task pays for one map.
        model, by_rule = self.parts_["model"], self.parts_["rule"]
        if not rule.any():
            return model._transform(proba, rule)
        if rule.all():
            return by_rule._transform(proba, ~rule)
        out = np.empty_like(proba)
        out[~rule] = model._transform(proba[~rule], rule[~rule])
        out[rule] = by_rule._transform(proba[rule], ~rule[rule])
        return out

    def _transform_row(self, row: list[float], rule: bool) -> list[float] | None:
        if rule:
            return self.parts_["rule"]._transform_row(row, False)
        return self.parts_["model"]._transform_row(row, False)

    def _state(self) -> dict[str, Any]:
        return {"parts_": {k: c.to_dict() for k, c in self.parts_.items()}}


_CLASSES: dict[str, type[Calibrator]] = {
    "none": IdentityCalibrator,
    "temperature": TemperatureCalibrator,
    "isotonic": IsotonicCalibrator,
    "top_isotonic": TopLabelCalibrator,
}
_GROUPED = "+expert"


def make_calibrator(method: str = DEFAULT_METHOD) -> Calibrator:
    """Return an unfitted calibrator of ``method`` (one of :data:`METHODS`)."""
    if method not in METHODS:
        raise ValueError(
            f"The calibration method must be one of {list(METHODS)}. "
            f"Got {method!r} instead."
        )
    if method.endswith(_GROUPED):
        return ByExpertCalibrator(method.removesuffix(_GROUPED))
    return _CLASSES[method]()


def calibrator_from_dict(data: Mapping[str, Any]) -> Calibrator:
    """Rebuild a fitted calibrator from :meth:`Calibrator.to_dict` output."""
    method = data.get("method")
    if method not in METHODS or "n_classes_" not in data:
        raise ValueError(
            f"A stored calibrator must name its method among {list(METHODS)} and "
            f"its 'n_classes_'. Got {dict(data)!r} instead."
        )
    calibrator = make_calibrator(str(method))
    calibrator.n_classes_ = int(data["n_classes_"])
    for key, value in data.items():
        if key == "parts_":
            value = {k: calibrator_from_dict(v) for k, v in value.items()}
        if key.endswith("_") and key != "n_classes_":
            setattr(calibrator, key, value)
    return calibrator


def fit_calibrator(
    proba: Any, y: Any, method: str = DEFAULT_METHOD, followed: Any = None
) -> Calibrator:
    """Return a calibrator of ``method`` fitted on the rows whose class is known.

    ``y`` may hold -1 (unknown label): those rows are left out; ``followed`` as in
    :meth:`Calibrator.fit`.
    """
    p = _check_proba(proba)
    labels = np.asarray(y)
    known = labels >= 0
    rule = _rule_rows(followed, p.shape[0])
    return make_calibrator(method).fit(p[known], labels[known], rule[known])
