"""Resource classes: the bin edges per target and the value written back per class.

The models predict a class, not a number. Each target has ascending ``edges`` (k edges
make k+1 classes: class 0 is ``(-inf, edges[0])``, class i is ``[edges[i-1],
edges[i])``, the last is ``[edges[-1], inf)``), a label per class and the value (in
the target's PanDA unit) that a prediction of that class writes into JEDI_TASKS. A
:class:`BinSet` holds the bins of every target under one ``version`` string, so a
model records exactly which classes it was trained on.
"""

from __future__ import annotations

import math
import warnings
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from panda_predictor.core.domain.targets import TARGETS, get_target
from panda_predictor.core.domain.units import to_panda

#: Class index given to a missing (NaN) value by :meth:`TargetBins.assign`.
UNKNOWN_CLASS = -1
#: Classes per target when fitting from history.
DEFAULT_N_CLASSES: dict[str, int] = {
    "ramcount": 4,
    "cputime": 4,
    "iointensity": 2,
    "walltime": 5,
}
#: Edges that are fixed by convention rather than fitted: PanDA's own ML prototype
#: calls a task I/O-"high" at >= 500 kBPerS.
DEFAULT_FIXED_EDGES: dict[str, tuple[float, ...]] = {"iointensity": (500.0,)}
#: Quantile of the training values inside a class used as the class's value: high, so
#: most tasks of the class get enough (a too-small request makes jobs fail).
DEFAULT_VALUE_QUANTILE = 0.95


def _fmt(values: Sequence[float] | np.ndarray) -> str:
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


@dataclass(frozen=True)
class TargetBins:
    """The classes of one target: edges, labels, the value per class and its unit.

    Parameters
    ----------
    target:
        Target name (``ramcount``, ``cputime``, ``iointensity``, ``walltime``).
    edges:
        Strictly increasing finite edges; k edges make k+1 classes.
    values:
        Value written back per class (k+1 finite numbers, in ``unit``).
    unit:
        PanDA unit of edges and values; default: the target's unit.
    labels:
        A short name per class; default ``"<lo>-<hi>"`` ranges.
    """

    target: str
    edges: tuple[float, ...]
    values: tuple[float, ...]
    unit: str = ""
    labels: tuple[str, ...] = ()
    #: The edges as an array, made once for :meth:`assign` (not compared).
    _edge_array: np.ndarray = field(init=False, repr=False, compare=False)
    #: The same as plain floats, for :meth:`assign_values` (one task's rules).
    _edge_list: list[float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        get_target(self.target)
        edges = tuple(float(e) for e in self.edges)
        values = tuple(float(v) for v in self.values)
        where = f"of target {self.target!r}"
        if not edges:
            raise ValueError(
                f"The 'edges' {where} must hold at least one edge. Got [] instead."
            )
        if not all(math.isfinite(e) for e in edges) or any(
            b <= a for a, b in zip(edges, edges[1:], strict=False)
        ):
            raise ValueError(
                f"The 'edges' {where} must be strictly increasing finite numbers. "
                f"Got {_fmt(edges)} instead."
            )
        if len(values) != len(edges) + 1 or not all(math.isfinite(v) for v in values):
            raise ValueError(
                f"The 'values' {where} must be {len(edges) + 1} finite numbers "
                f"(one per class, edges + 1). Got {_fmt(values)} instead."
            )
        labels = tuple(self.labels) or tuple(
            f"{_bound(lo)}-{_bound(hi)}" for lo, hi in _ranges(edges)
        )
        if len(labels) != len(edges) + 1:
            raise ValueError(
                f"The 'labels' {where} must be {len(edges) + 1} names (one per class). "
                f"Got {list(labels)} instead."
            )
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "unit", self.unit or TARGETS[self.target].unit)
        object.__setattr__(self, "_edge_array", np.asarray(edges, dtype=float))
        object.__setattr__(self, "_edge_list", self._edge_array.tolist())

    @property
    def n_classes(self) -> int:
        """Return the number of classes (edges + 1)."""
        return len(self.edges) + 1

    def assign(self, values: Any) -> np.ndarray:
        """Return the class index of each value; NaN/None -> :data:`UNKNOWN_CLASS`.

        A value equal to an edge belongs to the class above it.
        """
        array = np.asarray(values, dtype=float)
        classes = np.searchsorted(self._edge_array, array, side="right")
        return np.where(np.isnan(array), UNKNOWN_CLASS, classes).astype(np.int64)

    def assign_values(self, values: Sequence[float]) -> list[int]:
        """:meth:`assign` of a few plain floats (one task's rules), as a list."""
        edges = self._edge_list
        return [
            UNKNOWN_CLASS if math.isnan(v) else bisect_right(edges, v) for v in values
        ]

    def _check(self, cls: int) -> int:
        if not 0 <= int(cls) < self.n_classes:
            raise ValueError(
                f"The class of target {self.target!r} must be an integer in "
                f"[0, {self.n_classes - 1}]. Got {cls!r} instead."
            )
        return int(cls)

    def range_of(self, cls: int) -> tuple[float, float]:
        """Return ``(low, high)`` of class ``cls``: low included, high excluded."""
        return _ranges(self.edges)[self._check(cls)]

    def value_of(self, cls: int) -> float:
        """Return the value (in :attr:`unit`) that class ``cls`` writes back."""
        return self.values[self._check(cls)]

    def panda_value_of(self, cls: int, fixed: bool = False) -> tuple[int, str]:
        """Return class ``cls``'s value as PanDA stores it: ``(int value, unit)``.

        The one conversion of :func:`panda_predictor.core.domain.units.to_panda`:
        rounded up, a cputime below 10 HS06sPerEvent written x1000 in mHS06sPerEvent.
        """
        return to_panda(self.value_of(cls), self.unit, fixed)

    def to_dict(self) -> dict[str, Any]:
        """Return a plain mapping (YAML/JSON-ready) that :meth:`from_dict` reads."""
        return {
            "unit": self.unit,
            "edges": list(self.edges),
            "values": list(self.values),
            "labels": list(self.labels),
        }

    @classmethod
    def from_dict(cls, target: str, data: Mapping[str, Any]) -> TargetBins:
        """Build the bins of ``target`` from a mapping written by :meth:`to_dict`."""
        if not isinstance(data, Mapping):
            raise ValueError(
                f"The bins of target {target!r} must be a mapping with 'edges' and "
                f"'values'. Got {type(data).__name__} instead."
            )
        missing = [k for k in ("edges", "values") if k not in data]
        unexpected = sorted(set(data) - {"edges", "values", "unit", "labels"})
        if missing or unexpected:
            raise ValueError(
                f"The bins of target {target!r} must have the keys 'edges' and "
                f"'values' (optional 'unit', 'labels'). Missing {missing}, "
                f"unexpected {unexpected}."
            )
        for key in ("edges", "values", "labels"):
            if key in data and not isinstance(data[key], (list, tuple)):
                raise ValueError(
                    f"The {key!r} of target {target!r} must be a list. "
                    f"Got {data[key]!r} instead."
                )
        try:
            edges = tuple(float(e) for e in data["edges"])
            values = tuple(float(v) for v in data["values"])
        except (TypeError, ValueError):
            raise ValueError(
                f"The 'edges' and 'values' of target {target!r} must be numbers. "
                f"Got {data['edges']!r} and {data['values']!r} instead."
            ) from None
        unit = (
            str(data.get("unit") or TARGETS[target].unit) if target in TARGETS else ""
        )
        return cls(
            target, edges, values, unit, tuple(str(x) for x in data.get("labels", ()))
        )


def _ranges(edges: Sequence[float] | np.ndarray) -> list[tuple[float, float]]:
    bounds = [-math.inf, *(float(e) for e in edges), math.inf]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _bound(value: float) -> str:
    return "" if math.isinf(value) else f"{value:g}"


@dataclass(frozen=True)
class BinSet:
    """The bins of every target under one version string.

    Parameters
    ----------
    version:
        Identifies this set of classes; a model trained on it records it.
    targets:
        Bins per target name.
    """

    version: str
    targets: Mapping[str, TargetBins] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.version, str) or not self.version.strip():
            raise ValueError(
                f"The 'version' of the bins must be a non-empty string. "
                f"Got {self.version!r} instead."
            )
        for name, bins in self.targets.items():
            if bins.target != name:
                raise ValueError(
                    f"The bins stored under {name!r} must be for target {name!r}. "
                    f"Got bins of {bins.target!r} instead."
                )

    def __getitem__(self, target: str) -> TargetBins:
        try:
            return self.targets[target]
        except KeyError:
            raise KeyError(
                f"The bins have no target {target!r}; they hold {sorted(self.targets)}."
            ) from None

    def __contains__(self, target: object) -> bool:
        return target in self.targets

    def assign(self, target: str, values: Any) -> np.ndarray:
        """Return the class of each value of ``target`` (as TargetBins.assign)."""
        return self[target].assign(values)

    def to_dict(self) -> dict[str, Any]:
        """Return a plain mapping (YAML/JSON-ready) that :meth:`from_dict` reads."""
        return {
            "version": self.version,
            "targets": {name: bins.to_dict() for name, bins in self.targets.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BinSet:
        """Build a bin set from a mapping written by :meth:`to_dict`."""
        if not isinstance(data, Mapping) or not isinstance(
            data.get("targets"), Mapping
        ):
            raise ValueError(
                "The bins must be a mapping with 'version' and a 'targets' mapping. "
                f"Got {data!r:.200} instead."
            )
        unknown = sorted(set(data["targets"]) - set(TARGETS))
        if unknown:
            raise ValueError(
                f"The bins' targets must be among {list(TARGETS)}. Got unexpected "
                f"{unknown} instead."
            )
        targets = {
            name: TargetBins.from_dict(name, spec)
            for name, spec in data["targets"].items()
        }
        return cls(str(data.get("version", "")), targets)


def fit_bins(
    values_by_target: Mapping[str, Any],
    n_classes: Mapping[str, int] | None = None,
    quantiles: Mapping[str, Sequence[float]] | None = None,
    fixed_edges: Mapping[str, Sequence[float]] | None = None,
    value_quantile: float = DEFAULT_VALUE_QUANTILE,
    version: str = "fitted",
) -> BinSet:
    """Fit class edges from the quantiles of historical labels, and a value per class.

    Edges of a target come, in order of preference, from ``fixed_edges``, from the
    given ``quantiles`` of its values, or from equally spaced quantiles that make
    ``n_classes`` classes of about equal size. The value of a class is the
    ``value_quantile`` of the training values in it (the writer rounds it to PanDA's
    integer form); an empty class gets its upper edge (the lower edge for the top
    class). Tied quantiles are merged with a warning, so fewer classes result.

    Parameters
    ----------
    values_by_target:
        Historical label values per target (NaN ignored).
    n_classes:
        Classes per target; default :data:`DEFAULT_N_CLASSES`.
    quantiles:
        Explicit edge quantiles in (0, 1) per target (``n_classes - 1`` of them).
    fixed_edges:
        Edges to keep as they are; default :data:`DEFAULT_FIXED_EDGES`.
    value_quantile:
        Quantile of the values inside a class written back for it.
    version:
        Version string of the result.
    """
    wanted = {**DEFAULT_N_CLASSES, **(n_classes or {})}
    fixed = dict(DEFAULT_FIXED_EDGES if fixed_edges is None else fixed_edges)
    quantiles = quantiles or {}
    if not 0.0 < value_quantile <= 1.0:
        raise ValueError(
            f"The 'value_quantile' must be in (0, 1]. Got {value_quantile!r} instead."
        )
    targets: dict[str, TargetBins] = {}
    for name, raw in values_by_target.items():
        get_target(name)
        values = np.asarray(raw, dtype=float)
        values = values[np.isfinite(values)]
        if values.size == 0:
            raise ValueError(
                f"The values of target {name!r} must hold at least one finite number "
                "to fit bins. Got none instead."
            )
        if name in fixed:
            edges = np.asarray(fixed[name], dtype=float)
        else:
            qs = np.asarray(
                quantiles.get(name, np.arange(1, wanted[name]) / wanted[name]),
                dtype=float,
            )
            if qs.size == 0 or np.any((qs <= 0) | (qs >= 1)):
                raise ValueError(
                    f"The 'quantiles' of target {name!r} must be numbers in (0, 1). "
                    f"Got {_fmt(qs)} instead."
                )
            edges = np.unique(np.quantile(values, np.sort(qs)))
            if edges.size < qs.size:
                warnings.warn(
                    f"Target {name!r}: tied quantiles, {edges.size + 1} classes "
                    f"instead of {qs.size + 1}.",
                    stacklevel=2,
                )
        classes = np.searchsorted(edges, values, side="right")
        class_values = []
        for cls, (low, high) in enumerate(_ranges(edges)):
            inside = values[classes == cls]
            if inside.size:
                class_values.append(float(np.quantile(inside, value_quantile)))
            else:
                class_values.append(high if math.isfinite(high) else low)
        targets[name] = TargetBins(name, tuple(edges), tuple(class_values))
    return BinSet(version, targets)
