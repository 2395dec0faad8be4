"""PanDA's stored form of a resource value: one conversion for every writer.

Our values (labels, class values, predictions) are floats in the target's base unit
(``MBPerCore``, ``HS06sPerEvent``, ``kBPerS``, ``kSI2kseconds``). JEDI_TASKS stores
integers, so PanDA rounds up, and a CPU time below 10 HS06sPerEvent is stored x1000
as ``mHS06sPerEvent`` to keep its precision (``getScoutJobData_JEDI`` in
``pandaserver/taskbuffer/db_proxy_mods/task_utils_module.py``;
``JediTaskSpec.getCpuTime`` divides by 1000 again). A unit ending in ``Fixed``
(``MBPerCoreFixed``, ``HS06sPerEventFixed``, ...) means the same number, but later
job measurements must not overwrite it.

The hook's writer, the JEDI refiner, the labels and the simulator all convert here,
so a value is rounded exactly once, at the edge to PanDA.
"""

from __future__ import annotations

import math

import numpy as np

from panda_predictor.core.domain.task_prediction import TargetPrediction

#: Base unit of cputime; below :data:`MILLI_CPUTIME_BELOW` it is stored x1000.
CPUTIME_UNIT = "HS06sPerEvent"
#: PanDA's unit for cputime values that were multiplied by 1000.
MILLI_CPUTIME_UNIT = "mHS06sPerEvent"
#: Below this many HS06sPerEvent PanDA stores cputime x1000 in mHS06sPerEvent.
MILLI_CPUTIME_BELOW = 10.0
#: Suffix of a unit whose value later measurements must not overwrite.
FIXED_SUFFIX = "Fixed"
#: Units PanDA knows a ``...Fixed`` form of (ramCount and cpuTime).
FIXABLE_UNITS = ("MBPerCore", CPUTIME_UNIT, MILLI_CPUTIME_UNIT)
#: Decimals kept before rounding up, so 2.3 * 1000 = 2299.9999999999995 gives 2300.
_NOISE_DECIMALS = 6


def round_up(value: float) -> int:
    """Return ``value`` rounded up to an integer, ignoring float noise below 1e-6."""
    return math.ceil(round(float(value), _NOISE_DECIMALS))


def is_fixed(unit: str | None) -> bool:
    """Return whether a stored unit forbids later measurements to overwrite it."""
    return bool(unit) and str(unit).endswith(FIXED_SUFFIX)


def to_panda(
    value: float, unit: str, fixed: bool | None = None, milli: bool = True
) -> tuple[int, str]:
    """Return ``(integer, unit)`` as PanDA stores ``value`` given in ``unit``.

    Parameters
    ----------
    value:
        The value in the target's base unit (a float: class values are fitted).
    unit:
        Its unit (``MBPerCore``, ``HS06sPerEvent``, ``kBPerS``, ...), possibly
        already ``...Fixed`` (a decision that chose to keep its value).
    fixed:
        True: store MBPerCore and (m)HS06sPerEvent in their ``...Fixed`` form;
        False: never; None: as ``unit`` says (the ``fixed_units`` setting, unset).
    milli:
        Store a cputime below 10 x1000 in ``mHS06sPerEvent``; False: always plain
        ``HS06sPerEvent``, rounded up (the database path, see
        :mod:`panda_predictor.db.writer`).
    """
    if not math.isfinite(value):
        raise ValueError(
            f"The value in {unit!r} must be a finite number. Got {value!r} instead."
        )
    base = unit.removesuffix(FIXED_SUFFIX)
    keep = unit != base if fixed is None else fixed
    if milli and base == CPUTIME_UNIT and value < MILLI_CPUTIME_BELOW:
        stored, base = round_up(value * 1000.0), MILLI_CPUTIME_UNIT
    else:
        stored = round_up(value)
    if keep and base in FIXABLE_UNITS:
        base += FIXED_SUFFIX
    return stored, base


def from_panda(value: float, unit: str) -> tuple[float, str]:
    """Return ``(value, base unit)`` of a value PanDA stores (the inverse of
    :func:`to_panda`, as ``JediTaskSpec.getCpuTime`` reads it)."""
    base = unit.removesuffix(FIXED_SUFFIX)
    if base == MILLI_CPUTIME_UNIT:
        return float(value) / 1000.0, CPUTIME_UNIT
    return float(value), base


def cputime_to_panda(
    values: np.ndarray, below: float = MILLI_CPUTIME_BELOW
) -> tuple[np.ndarray, np.ndarray]:
    """Return PanDA's stored cputime and whether it is milli, for a whole column.

    The vectorised :func:`to_panda` of HS06sPerEvent values (labels, simulator):
    NaN stays NaN; ``milli`` is False where the value is NaN. ``below`` is the
    milli threshold (PanDA's 10).
    """
    values = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        milli = values < below
    scaled = np.where(milli, values * 1000.0, values)
    return np.ceil(np.round(scaled, _NOISE_DECIMALS)), milli


def prediction_to_panda(
    prediction: TargetPrediction, fixed: bool | None = None, milli: bool = True
) -> tuple[int, str]:
    """Return ``(integer, unit)`` PanDA stores for one target's predicted value.

    A cputime class value of 0 falls back to the class's upper edge: PanDA reads a
    zero cputime as "undefined" (``JediTaskSpec.getCpuTime`` is falsy and the
    brokerage then treats the task as having no walltime estimate).
    """
    value = float(prediction.value)
    if prediction.target == "cputime" and value <= 0 and prediction.upper:
        value = float(prediction.upper)
    return to_panda(value, prediction.unit, fixed, milli)


def database_value(
    prediction: TargetPrediction, fixed_units: bool | None = None
) -> tuple[int, str]:
    """Return the value and unit JEDI_TASKS should hold for a target.

    What the database write-back writes and what a ``scout_prediction`` message
    carries (its plugin writes JEDI_TASKS the same way).

    PanDA's re-measurement (``getScoutJobData_JEDI``, run after 5 and 100 jobs)
    takes the previous cpuTimeUnit from the task *parameters*, not from JEDI_TASKS:
    a ``...Fixed`` cputime written here is ignored, and a later measurement of 10
    or more left under a written ``mHS06sPerEvent`` would be read 1000x too small
    (PanDA rewrites the unit to HS06sPerEvent only when the parameters carry one).
    So cputime goes in plain ``HS06sPerEvent``, rounded up, never Fixed; ramcount
    (whose Fixed unit PanDA reads from JEDI_TASKS) follows ``fixed_units``, and
    where that is None, the unit the decision chose (``MBPerCoreFixed`` where
    training found its values better kept than re-measured).
    """
    if prediction.target == "cputime":
        return prediction_to_panda(prediction, fixed=False, milli=False)
    return prediction_to_panda(prediction, fixed_units)
