"""Read gate tolerances given as ``NAME=VALUE`` (the CLI's ``--gate-tolerance``).

Short names (``accuracy``, ``tail_recall``, ``delay_share``, ...) keep the command
line readable; each maps to a field of :class:`model_registry.gate.GateThresholds`.
A wrong name or value is the user's to fix, so it raises :class:`ToleranceError`
(one CLI line).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from panda_predictor.errors import UserInputError

#: Names of ``--gate-tolerance NAME=VALUE`` -> the :class:`GateThresholds` field.
TOLERANCE_NAMES = {
    "accuracy": "max_accuracy_drop",
    "tail_recall": "max_tail_recall_drop",
    "under_allocation": "max_under_allocation_rise",
    "delay_share": "max_delay_share",
    "floor_noise_factor": "floor_noise_factor",
    "waste": "max_waste_rise",
}


class ToleranceError(UserInputError):
    """A gate tolerance given on the command line is not ``NAME=NUMBER``."""


def parse_tolerances(items: Iterable[str]) -> dict[str, float]:
    """Return :class:`GateThresholds` fields from ``NAME=VALUE`` texts.

    ``NAME`` is a key of :data:`TOLERANCE_NAMES` (``accuracy``, ``tail_recall``,
    ``under_allocation``, ``delay_share``, ``floor_noise_factor``, ``waste``)
    or the field name itself; ``VALUE`` a finite number (>= 0; >= -1 for the noise
    factor).
    """
    fields: dict[str, float] = {}
    names = ", ".join(TOLERANCE_NAMES)
    for item in items:
        name, sep, text = str(item).partition("=")
        name = name.strip()
        field_name = TOLERANCE_NAMES.get(name, name)
        if not sep or field_name not in TOLERANCE_NAMES.values():
            raise ToleranceError(
                f"The gate tolerance must be NAME=VALUE with NAME one of {names}. "
                f"Got {item!r} instead."
            )
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        lowest = -1.0 if field_name == "floor_noise_factor" else 0.0
        if not math.isfinite(value) or value < lowest:
            raise ToleranceError(
                f"The gate tolerance {name!r} must be a finite number >= "
                f"{lowest:g}. Got {text.strip()!r} instead."
            )
        fields[field_name] = value
    return fields
