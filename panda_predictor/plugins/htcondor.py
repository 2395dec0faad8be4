"""HTCondor submit attributes and schedd job transforms from a task's prediction.

PanDA turns a task's resources into a job's requests with these formulas (PANDA.md):
memory ``ramCount * coreCount + baseRamCount`` (MB) and walltime limit
``cpuTime * nEvents / coreCount / corePower / (cpuEfficiency / 100) + baseWalltime``
(seconds). :func:`submit_attributes` applies them to a :class:`TaskPrediction` and
returns HTCondor submit commands (``request_memory``, ``request_cpus``,
``request_disk``, ``allowed_job_duration``, ``+MaxWallTimeMins``);
:func:`apply_to_submit` writes them into an ``htcondor2.Submit`` description, and
:func:`job_transform` renders the same requests as a schedd job transform
(``JOB_TRANSFORM_NAMES`` / ``JOB_TRANSFORM_<name>``) keyed on a task-id job
attribute, for sites that prefer configuration over editing submit files.

Only ``applied`` (confident) predictions produce resource requests by default: on
``kept_scouts`` the job keeps what its submitter asked for.

The job shape, task ids and attribute names come from the site or the task's
submitter, so invalid ones raise :class:`~panda_predictor.errors.UserInputError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field

from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.core.domain.units import (
    CPUTIME_UNIT,
    FIXED_SUFFIX,
    MILLI_CPUTIME_UNIT,
    from_panda,
)
from panda_predictor.errors import UserInputError

#: Submit command -> job ClassAd attribute, for the transform.
CLASSAD_NAMES: dict[str, str] = {
    "request_memory": "RequestMemory",
    "request_cpus": "RequestCpus",
    "request_disk": "RequestDisk",
    "allowed_job_duration": "AllowedJobDuration",
    "+MaxWallTimeMins": "MaxWallTimeMins",
}
#: Job attribute that names the JEDI task, unless the site uses another one.
DEFAULT_TASK_ATTRIBUTE = "JediTaskID"
_ATTRIBUTE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")


@dataclass(frozen=True)
class JobShape:
    """What is known about the jobs of a task beyond its prediction.

    Defaults are PanDA's (corePower 10 HS06 per core, cpuEfficiency 90 %,
    baseWalltime 600 s, no baseRamCount).

    Parameters
    ----------
    core_count:
        Cores per job (``coreCount``).
    events_per_job:
        Events one job processes (``nEventsPerJob``); without it no walltime limit.
    base_ram_mb:
        Fixed memory per job on top of the per-core amount (``baseRamCount``).
    core_power:
        HS06 per core of the site (``corePower``).
    cpu_efficiency:
        Expected CPU efficiency in percent (``cpuEfficiency``).
    base_walltime:
        Fixed seconds per job (``baseWalltime``).
    disk_mb:
        Scratch disk per job in MB (``workDiskCount``), if known.
    """

    core_count: int = 1
    events_per_job: int | None = None
    base_ram_mb: int = 0
    core_power: float = 10.0
    cpu_efficiency: float = 90.0
    base_walltime: int = 600
    disk_mb: int | None = None

    def __post_init__(self) -> None:
        _positive_int("core_count", self.core_count)
        if self.events_per_job is not None:
            _positive_int("events_per_job", self.events_per_job)
        if self.disk_mb is not None:
            _positive_int("disk_mb", self.disk_mb)
        for name in ("base_ram_mb", "base_walltime"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UserInputError(
                    f"The '{name}' field must be a non-negative integer. "
                    f"Got {value!r} instead."
                )
        if not isinstance(self.core_power, int | float) or not self.core_power > 0:
            raise UserInputError(
                f"The 'core_power' field must be a positive number (HS06 per core). "
                f"Got {self.core_power!r} instead."
            )
        eff = self.cpu_efficiency
        if not isinstance(eff, int | float) or not 0 < eff <= 100:
            raise UserInputError(
                f"The 'cpu_efficiency' field must be a percentage in (0, 100]. "
                f"Got {eff!r} instead."
            )


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserInputError(
            f"The '{name}' field must be a positive integer. Got {value!r} instead."
        )


def memory_mb(ramcount_mb_per_core: float, shape: JobShape) -> int:
    """Return a job's memory request in MB: ramCount * coreCount + baseRamCount."""
    return math.ceil(ramcount_mb_per_core * shape.core_count + shape.base_ram_mb)


def walltime_seconds(cputime_hs06s_per_event: float, shape: JobShape) -> int | None:
    """Return a job's walltime limit in seconds, or None without events per job.

    ``cpuTime * nEvents / coreCount / corePower / (cpuEfficiency/100) + baseWalltime``.
    """
    if shape.events_per_job is None:
        return None
    seconds = (
        cputime_hs06s_per_event
        * shape.events_per_job
        / shape.core_count
        / shape.core_power
        / (shape.cpu_efficiency / 100.0)
    )
    return math.ceil(seconds + shape.base_walltime)


def _cputime_per_event(prediction: TaskPrediction) -> float | None:
    target = prediction.targets.get("cputime")
    if target is None:
        return None
    value, unit = from_panda(target.value, target.unit)
    if target.unit.removesuffix(FIXED_SUFFIX) == MILLI_CPUTIME_UNIT:
        return value
    if unit != CPUTIME_UNIT:
        raise ValueError(
            f"The 'cputime' unit must be HS06sPerEvent or mHS06sPerEvent. "
            f"Got {target.unit!r} instead."
        )
    # A 0 class value means "below the first edge": use the edge, never no limit.
    return float(value or target.upper or 0.0)


def submit_attributes(
    prediction: TaskPrediction, shape: JobShape, only_applied: bool = True
) -> dict[str, str]:
    """Return the HTCondor submit commands that request a task's predicted resources.

    Parameters
    ----------
    prediction:
        The task's prediction (ramcount in MBPerCore, cputime in HS06sPerEvent).
    shape:
        Cores, events per job and PanDA's constants for the formulas.
    only_applied:
        If true (default), a ``kept_scouts`` prediction gives only ``request_cpus``:
        the submitter's own memory and time requests stay.

    Returns
    -------
    Submit command -> value, as strings (what ``htcondor2.Submit`` holds):
    ``request_cpus`` always; ``request_memory`` (MB) with a ramcount prediction;
    ``request_disk`` (KB) when ``shape.disk_mb`` is known; ``allowed_job_duration``
    (s) and ``+MaxWallTimeMins`` with a cputime prediction and events per job.
    """
    attributes = {"request_cpus": str(shape.core_count)}
    if shape.disk_mb is not None:
        attributes["request_disk"] = str(shape.disk_mb * 1024)
    if only_applied and prediction.decision != "applied":
        return attributes
    ram = prediction.targets.get("ramcount")
    if ram is not None:
        attributes["request_memory"] = str(memory_mb(ram.value, shape))
    cputime = _cputime_per_event(prediction)
    seconds = None if cputime is None else walltime_seconds(cputime, shape)
    if seconds is not None:
        attributes["allowed_job_duration"] = str(seconds)
        attributes["+MaxWallTimeMins"] = str(math.ceil(seconds / 60))
    return attributes


def apply_to_submit(
    submit: MutableMapping[str, str],
    attributes: Mapping[str, str],
    overwrite: bool = False,
) -> dict[str, str]:
    """Write submit attributes into an ``htcondor2.Submit`` (or any mapping).

    Parameters
    ----------
    submit:
        The submit description, changed in place.
    attributes:
        From :func:`submit_attributes`.
    overwrite:
        If false (default), a command the description already sets is kept: the
        submitter's explicit request wins.

    Returns
    -------
    The commands actually written.
    """
    written = {}
    for key, value in attributes.items():
        alternative = "MY." + key[1:] if key.startswith("+") else None
        present = key in submit or (alternative is not None and alternative in submit)
        if present and not overwrite:
            continue
        submit[key] = value
        written[key] = value
    return written


@dataclass(frozen=True)
class TaskTransform:
    """The job attributes one schedd transform sets for the jobs of one task.

    Parameters
    ----------
    task_id:
        The jediTaskID the transform matches.
    set_attributes:
        Submit command (see :data:`CLASSAD_NAMES`) -> number, written with ``SET``.
    evalset:
        Job attribute -> ClassAd expression, written with ``EVALSET`` (evaluated
        against the job, e.g. its own ``RequestCpus``).
    """

    task_id: int
    set_attributes: Mapping[str, str]
    evalset: Mapping[str, str] = field(default_factory=dict)


def transform_for(
    task_id: int,
    prediction: TaskPrediction,
    shape: JobShape,
    only_applied: bool = True,
) -> TaskTransform:
    """Return the transform of one task: its predicted requests, memory per core.

    The memory becomes ``EVALSET RequestMemory ceiling(<ramCount> * RequestCpus +
    <baseRamCount>)`` so every job of the task gets the right amount for its own
    core count; ``request_cpus`` is left to the submitter. ``only_applied`` as in
    :func:`submit_attributes`.
    """
    attributes = submit_attributes(prediction, shape, only_applied)
    attributes.pop("request_cpus")
    evalset = {}
    ram = prediction.targets.get("ramcount")
    if attributes.pop("request_memory", None) is not None and ram is not None:
        evalset["RequestMemory"] = (
            f"ceiling({ram.value} * RequestCpus + {shape.base_ram_mb})"
        )
    return TaskTransform(task_id, attributes, evalset)


def job_transform(
    transforms: Iterable[TaskTransform],
    task_attribute: str = DEFAULT_TASK_ATTRIBUTE,
    prefix: str = "PANDA_PREDICTOR",
) -> str:
    """Return a schedd config snippet with one job transform per task.

    Each ``JOB_TRANSFORM_<prefix>_<jediTaskID>`` matches the jobs whose
    ``task_attribute`` equals the task id (``REQUIREMENTS``) and sets their
    resource attributes (``SET`` / ``EVALSET``); ``JOB_TRANSFORM_NAMES`` is
    extended, not replaced.

    Parameters
    ----------
    transforms:
        One :class:`TaskTransform` per task.
    task_attribute:
        Job ClassAd attribute holding the jediTaskID (set by the submitter).
    prefix:
        Transform name prefix.
    """
    for name, value in (("task_attribute", task_attribute), ("prefix", prefix)):
        if not isinstance(value, str) or not _ATTRIBUTE_NAME.match(value):
            raise UserInputError(
                f"The '{name}' field must be a ClassAd attribute name (letters, "
                f"digits, '_'). Got {value!r} instead."
            )
    names: list[str] = []
    blocks: list[str] = []
    for transform in transforms:
        _positive_int("jediTaskID", transform.task_id)
        name = f"{prefix}_{transform.task_id}"
        lines = [f"REQUIREMENTS {task_attribute} == {transform.task_id}"]
        for key, value in transform.set_attributes.items():
            if key not in CLASSAD_NAMES:
                raise ValueError(
                    f"The submit attribute must be one of {list(CLASSAD_NAMES)}. "
                    f"Got {key!r} instead."
                )
            if not _NUMBER.fullmatch(str(value)):
                raise ValueError(
                    f"The {key!r} value must be a number. Got {value!r} instead."
                )
            lines.append(f"SET {CLASSAD_NAMES[key]} {value}")
        for attribute, expression in transform.evalset.items():
            if not _ATTRIBUTE_NAME.match(attribute) or "\n" in expression:
                raise ValueError(
                    f"The EVALSET entry must be an attribute name and a one-line "
                    f"expression. Got {attribute!r}: {expression!r} instead."
                )
            lines.append(f"EVALSET {attribute} {expression}")
        names.append(name)
        body = "\n".join(f"   {line}" for line in lines)
        blocks.append(f"JOB_TRANSFORM_{name} @=end\n{body}\n@end")
    if not names:
        raise ValueError(
            "The 'transforms' field must hold at least one task. Got none instead."
        )
    header = (
        "# Generated by panda-predictor: resource requests of predicted PanDA tasks.\n"
        f"JOB_TRANSFORM_NAMES = $(JOB_TRANSFORM_NAMES) {' '.join(names)}"
    )
    return header + "\n" + "\n".join(blocks) + "\n"


__all__ = [
    "CLASSAD_NAMES",
    "DEFAULT_TASK_ATTRIBUTE",
    "JobShape",
    "apply_to_submit",
    "job_transform",
    "memory_mb",
    "submit_attributes",
    "TaskTransform",
    "transform_for",
    "walltime_seconds",
]
