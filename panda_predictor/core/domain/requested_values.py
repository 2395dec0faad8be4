"""The requester's own resource values, treated the way PanDA's scouts treat them.

A task may come with preset values (``ramCount``/``ramUnit``, ``cpuTime``/
``cpuTimeUnit``, ``walltime``). Skipping the scouts must leave the task as the scouts
would have, so the prediction follows the scouts' rules, taken from
``getScoutJobData_JEDI`` and ``setScoutJobData_JEDI`` in
``pandaserver/taskbuffer/db_proxy_mods/task_utils_module.py`` (panda-server 1.0.4):

- a unit ending in ``Fixed`` (``MBPerCoreFixed``, ``HS06sPerEventFixed``,
  ``mHS06sPerEventFixed``) is never overwritten: the scouts skip that measurement;
- otherwise the prediction replaces the preset ramCount, cpuTime and ioIntensity, as
  the scouts' estimate does;
- walltime: the preset value stays when it is larger than the estimate, or negative
  ("use preset value if larger"); an estimate of 0 is not written, because 0 is
  PanDA's "no walltime estimate" (the scouts' cut-off below one hour of CPU, and
  ``TaskRefinerBase``'s default when the requester gives none);
- far from the preset value: PanDA sets a task ``exhausted`` when the scouts measure
  a cpuTime above ``SCOUT_WRONG_CPUTIME_THRESHOLD`` (default 2) times the preset one,
  or a ramCount above ``RAM_THR_EXAUSTED`` (default 4, x1000 MB) while the preset one
  is below it. Such a task is probably misconfigured, so it keeps its scouts and
  PanDA's own guard runs.

Values are compared in the targets' base units (mHS06sPerEvent read as
HS06sPerEvent / 1000, as ``JediTaskSpec.getCpuTime`` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from panda_predictor.core.domain.targets import TARGETS
from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.core.domain.units import (
    CPUTIME_UNIT,
    from_panda,
    is_fixed,
    prediction_to_panda,
)
from panda_predictor.core.reason_text import number

#: PanDA's ``SCOUT_WRONG_CPUTIME_THRESHOLD`` default: a measured cpuTime above this
#: many times the preset one sends the task to ``exhausted``.
WRONG_CPUTIME_FACTOR = 2.0
#: PanDA's ``RAM_THR_EXAUSTED`` default (4) x 1000: a measured ramCount above it
#: while the preset one is below it sends the task to ``exhausted``.
RAM_EXHAUSTED_MB = 4000.0
#: Where a JEDI_TASKS row (lower-case names) holds each target's value and unit.
COLUMN_KEYS: dict[str, tuple[str, str | tuple[str, ...]]] = {
    t.name: (t.value_column, t.unit_column) for t in TARGETS.values()
}
#: The reason's prefix of a task kept for being far from its preset values.
FAR_FROM_REQUEST = "far from the requester's value"
#: The name of the setting, and the start of the note of a preset it keeps.
NEVER_BELOW_PRESET = "never_below_preset"


@dataclass(frozen=True)
class Requested:
    """One preset value of a task as PanDA stores it (``None``: not given)."""

    value: float | None
    unit: str | None

    @property
    def given(self) -> bool:
        """Return whether the requester gave a usable (positive, finite) value."""
        return self.value is not None and math.isfinite(self.value) and self.value > 0


@dataclass(frozen=True)
class WritePlan:
    """What to write for one predicted task, after the requester's values.

    ``values`` holds ``target -> (integer, unit)`` in PanDA's stored form;
    ``kept`` says, per target not written, why the task's own value stays;
    ``far`` is the reason to keep the scouts instead (None: write ``values``).
    """

    values: dict[str, tuple[int, str]] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
    far: str | None = None


def requested_values(
    source: Mapping[str, Any], keys: Mapping[str, tuple[str, str | tuple[str, ...]]]
) -> dict[str, Requested]:
    """Return the preset value of each target found in a row or parameter map.

    Parameters
    ----------
    source:
        A JEDI_TASKS row or a task parameter map.
    keys:
        ``target -> (value key, unit key or keys)``; the first unit key present wins
        (PanDA reads ``ramUnit`` before ``ramCountUnit``).
    """
    out: dict[str, Requested] = {}
    for target, (value_key, unit_keys) in keys.items():
        names = (unit_keys,) if isinstance(unit_keys, str) else unit_keys
        unit = next((source[k] for k in names if _present(source.get(k))), None)
        raw: Any = source.get(value_key)
        value = float(raw) if _present(raw) else None
        if target == "cputime" and value is not None and not unit:
            unit = CPUTIME_UNIT  # PanDA's default for a cpuTime without unit
        out[target] = Requested(value, str(unit) if unit else None)
    return out


def _present(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return not (isinstance(value, str) and not value.strip())


def _base(requested: Requested) -> float | None:
    """Return the preset value in the target's base unit, or None if not given."""
    if not requested.given:
        return None
    assert requested.value is not None
    if requested.unit is None:
        return requested.value
    return from_panda(requested.value, requested.unit)[0]


def far_from_request(
    prediction: TaskPrediction, requested: Mapping[str, Requested]
) -> str | None:
    """Return why the prediction is too far from the preset values, else None."""
    none = Requested(None, None)
    ram, cpu = requested.get("ramcount", none), requested.get("cputime", none)
    ram_target = prediction.targets.get("ramcount")
    if ram_target is not None and ram.given and not is_fixed(ram.unit):
        predicted = float(prediction_to_panda(ram_target)[0])
        preset = _base(ram)
        per_core = ram.unit is None or ram.unit.startswith("MBPerCore")
        if per_core and preset is not None and preset < RAM_EXHAUSTED_MB < predicted:
            return (
                f"{FAR_FROM_REQUEST}: ramcount "
                f"{number(predicted, RAM_EXHAUSTED_MB, None)} MBPerCore is above "
                f"{RAM_EXHAUSTED_MB:g} while the requested "
                f"{number(preset, RAM_EXHAUSTED_MB, None)} is below it "
                "(PanDA would set the task exhausted); scouts run"
            )
    cpu_target = prediction.targets.get("cputime")
    if cpu_target is not None and cpu.given and not is_fixed(cpu.unit):
        predicted = from_panda(*prediction_to_panda(cpu_target))[0]
        preset = _base(cpu)
        if preset is not None and predicted > WRONG_CPUTIME_FACTOR * preset:
            return (
                f"{FAR_FROM_REQUEST}: cputime "
                f"{number(predicted, WRONG_CPUTIME_FACTOR * preset, None)} "
                f"HS06sPerEvent is above {WRONG_CPUTIME_FACTOR:g} x the requested "
                f"{preset:g} "
                "(PanDA would set the task exhausted); scouts run"
            )
    return None


def preset_note(plan: WritePlan) -> str | None:
    """Return what ``never_below_preset`` kept in ``plan``, for the audit's reason."""
    notes = [note for note in plan.kept.values() if note.startswith(NEVER_BELOW_PRESET)]
    return "; ".join(notes) or None


def _below_preset(stored: tuple[int, str], preset: Requested) -> bool:
    """Return whether a stored prediction is below the requester's given value."""
    base = _base(preset)
    return base is not None and from_panda(*stored)[0] < base


def plan_write(
    prediction: TaskPrediction,
    requested: Mapping[str, Requested],
    fixed_units: bool | None = None,
    never_below_preset: bool = False,
    convert: Callable[
        [TargetPrediction, bool | None], tuple[int, str]
    ] = prediction_to_panda,
) -> WritePlan:
    """Return the values to write for a task, keeping the requester's where PanDA does.

    Parameters
    ----------
    prediction:
        The task's prediction (its decision is not looked at).
    requested:
        Preset value per target (see :func:`requested_values`).
    fixed_units:
        Write the ``...Fixed`` units so later measurements do not overwrite them
        (True), never (False), or as each target's predicted unit says (None).
    never_below_preset:
        Keep a preset value the prediction is below (the ``never_below_preset``
        setting): the requester's value is then a floor, and the task still skips
        its scouts with its other targets predicted. Its ``kept`` note starts with
        :data:`NEVER_BELOW_PRESET` so the audit can say so.
    convert:
        ``(target prediction, fixed_units) -> (integer, unit)``: PanDA's stored
        form on the writer's path (default :func:`prediction_to_panda`).
    """
    far = far_from_request(prediction, requested)
    plan = WritePlan(far=far)
    for name, target in prediction.targets.items():
        preset = requested.get(name, Requested(None, None))
        if name in ("ramcount", "cputime") and is_fixed(preset.unit):
            plan.kept[name] = f"requested {preset.value:g} {preset.unit} is fixed"
            continue
        stored = convert(target, fixed_units)
        if name == "walltime":
            if stored[0] == 0:
                plan.kept[name] = "0 means no walltime estimate in PanDA"
                continue
            if preset.value is not None and (
                preset.value > stored[0] or preset.value < 0
            ):
                plan.kept[name] = f"requested {preset.value:g} is larger"
                continue
        if never_below_preset and _below_preset(stored, preset):
            plan.kept[name] = (
                f"{NEVER_BELOW_PRESET}: {name} predicted {stored[0]} {stored[1]} is "
                f"below the requested {preset.value:g} {preset.unit or ''}".rstrip()
                + ", the requested value stays"
            )
            continue
        plan.values[name] = stored
    return plan
