"""The four resource targets, named after PanDA's JEDI_TASKS columns and units."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One predicted resource: its name, PanDA's unit and the columns it fills."""

    name: str
    unit: str
    value_column: str
    unit_column: str
    description: str


RAMCOUNT = Target(
    "ramcount", "MBPerCore", "ramcount", "ramunit", "memory per core (MB)"
)
CPUTIME = Target(
    "cputime", "HS06sPerEvent", "cputime", "cputimeunit", "CPU time per event (HS06 s)"
)
IOINTENSITY = Target(
    "iointensity",
    "kBPerS",
    "iointensity",
    "iointensityunit",
    "I/O rate per core (kB/s)",
)
WALLTIME = Target(
    "walltime",
    "kSI2kseconds",
    "walltime",
    "walltimeunit",
    "CPU seconds per MB of input (PanDA's walltime measure)",
)

TARGETS: dict[str, Target] = {
    t.name: t for t in (RAMCOUNT, CPUTIME, IOINTENSITY, WALLTIME)
}
TARGET_NAMES: tuple[str, ...] = tuple(TARGETS)


def get_target(name: str) -> Target:
    """Return the target called ``name``; raise a clear error for any other name."""
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(
            f"The target must be one of {list(TARGETS)}. Got {name!r} instead."
        ) from None
