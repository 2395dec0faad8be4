"""PanDA's resource type of a task (SCORE, MCORE, ..._HIMEM), by PanDA's own rule.

``ResourceSpec.match_task_basic`` (``pandaserver/taskbuffer/ResourceSpec.py``) and
``reset_resource_type_task`` (JEDI's DB proxy) pick the first row of
RESOURCE_TYPES whose core and RAM-per-core bounds hold the task: a coreCount of None
counts as 1 and 0 as 8; the RAM per core is ``ramCount + baseRamCount / cores`` for
``MBPerCore`` units and ``(ramCount + baseRamCount) / cores`` otherwise, scaled by
``JobUtils.MEMORY_COMPENSATION`` (0.9) and truncated; no match gives ``Undefined``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: ``JobUtils.MEMORY_COMPENSATION``: PanDA compares 90 % of the RAM per core.
MEMORY_COMPENSATION = 0.9
#: PanDA's name when no resource type matches.
UNDEFINED = "Undefined"


@dataclass(frozen=True)
class ResourceType:
    """One row of PanDA's RESOURCE_TYPES table (None: no bound)."""

    name: str
    mincore: int | None
    maxcore: int | None
    minrampercore: int | None
    maxrampercore: int | None

    def matches(
        self,
        corecount: int | None,
        ramcount: float | None,
        baseramcount: float | None,
        ramunit: str | None,
    ) -> bool:
        """Return whether a task with these values is of this resource type."""
        cores = 1 if corecount is None else (8 if corecount == 0 else corecount)
        ram = ramcount or 0
        base = baseramcount or 0
        if self.mincore is not None and cores < self.mincore:
            return False
        if self.maxcore is not None and cores > self.maxcore:
            return False
        if ramunit in ("MBPerCore", "MBPerCoreFixed"):
            per_core = (ram * cores + base) / cores
        else:
            per_core = (ram + base) / cores
        per_core = int(per_core * MEMORY_COMPENSATION)
        if self.minrampercore is not None and per_core < self.minrampercore:
            return False
        return not (self.maxrampercore is not None and per_core > self.maxrampercore)


def resource_type_of(
    types: Iterable[ResourceType],
    corecount: int | None,
    ramcount: float | None,
    baseramcount: float | None,
    ramunit: str | None,
) -> str:
    """Return the first matching resource type's name, or ``Undefined``."""
    for candidate in types:
        if candidate.matches(corecount, ramcount, baseramcount, ramunit):
            return candidate.name
    return UNDEFINED
