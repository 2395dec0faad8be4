"""Turn a task definition (our names or PanDA's parameter-map names) into a tasks frame.

Scientists and the HTTP service describe a task before JEDI has stored it, either with
our lower-case JEDI_TASKS names (``processingtype``, ``corecount``, ...) or with the
camelCase names of a PanDA task parameter map (``processingType``, ``coreCount``,
``transPath``, ...). :func:`parse_task_definitions` validates one definition or a list
with pydantic and raises :class:`TaskDefinitionError`, whose message names the field,
what was expected and what came; :func:`tasks_frame` then builds the one-row-per-task
frame (columns :data:`~panda_predictor.core.features.pipeline.TASK_COLUMNS`) that
:class:`~panda_predictor.serving.predictor.Predictor` expects. PanDA's names stop here.

A real parameter map carries many keys that do not describe resources (``taskName``,
``log``, ``nEventsPerJob``, ...). Those listed in :data:`IGNORED_PANDA_KEYS` are
accepted and ignored; any other unknown key is an error, so a typo such as
``coreCont`` never silently drops a feature.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from panda_predictor.core.features.pipeline import TASK_COLUMNS
from panda_predictor.errors import UserInputError

#: Most tasks one request or file may hold (keeps a single call bounded).
MAX_TASKS = 1000

#: Largest id or count PanDA can store: its keys and counts are ``bigint``
#: (JEDI_TASKS.JEDITASKID, JEDI_DATASETS.NFILES/NEVENTS). A larger number is a typo or
#: an attack, and would overflow SQLite's integers and ``float()`` further on.
MAX_BIGINT = 2**63 - 1

#: Creation dates accepted (UTC, naive): PanDA's era, well inside what pandas and
#: ``datetime`` can shift by a time zone (year 1 at +01:00 overflows).
EARLIEST_CREATION = datetime(1970, 1, 1)
LATEST_CREATION = datetime(2100, 1, 1)

#: PanDA parameter-map keys that do not feed the models; accepted and ignored.
IGNORED_PANDA_KEYS: frozenset[str] = frozenset(
    {
        "taskName",
        "uniqueTaskName",
        "vo",
        "cloud",
        "site",
        "excludedSite",
        "includedSite",
        "log",
        "nEventsPerJob",
        "nFilesPerJob",
        "nEventsPerFile",
        "nGBPerJob",
        "nMaxFilesPerJob",
        "ramCount",
        "ramUnit",
        "baseRamCount",
        "cpuTime",
        "cpuTimeUnit",
        "ioIntensity",
        "ioIntensityUnit",
        "walltime",
        "walltimeUnit",
        "baseWalltime",
        "cpuEfficiency",
        "outDiskCount",
        "outDiskUnit",
        "workDiskCount",
        "workDiskUnit",
        "skipScout",
        "taskPriority",
        "currentPriority",
        "ticketID",
        "ticketSystemType",
        "reqID",
        "respectLB",
        "osInfo",
        "noInput",
        "maxAttempt",
        "maxFailure",
        "useLocalIO",
        "gshare",
        "sourceURL",
        "cliParams",
        "dsForIN",
        "buildSpec",
        "countryGroup",
        "transForm",
        "fixedSandbox",
        "container_name",
        "multiStepExec",
        "nucleus",
        "ddmBackEnd",
        "toStaging",
        "inputPreStaging",
        "mergeOutput",
        "mergeSpec",
        "esConvertible",
        "useRealNumEvents",
    }
)


class TaskDefinitionError(UserInputError):
    """A task definition is invalid; the message names the field and what was wrong."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _alias(*names: str) -> Any:
    return AliasChoices(*names)


class InputDataset(BaseModel):
    """One input dataset: its name and, once known, its file and event counts."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr | None = Field(
        None, validation_alias=_alias("name", "datasetName", "datasetname")
    )
    nfiles: StrictInt | None = Field(
        None, ge=0, le=MAX_BIGINT, validation_alias=_alias("nFiles", "nfiles")
    )
    nevents: StrictInt | None = Field(
        None, ge=0, le=MAX_BIGINT, validation_alias=_alias("nEvents", "nevents")
    )


class TaskDefinition(BaseModel):
    """What is known about a task at submission, under our or PanDA's names.

    Every field is optional: a missing one is unknown to the models (NULL), as at
    refine time. Counts of files and events come either as totals (``nFiles``,
    ``nEvents``) or per input dataset (``inDS``).
    """

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    jeditaskid: StrictInt | None = Field(
        None,
        ge=0,
        le=MAX_BIGINT,
        validation_alias=_alias("jediTaskID", "jeditaskid", "taskID"),
    )
    processingtype: StrictStr | None = Field(
        None, max_length=64, validation_alias=_alias("processingType", "processingtype")
    )
    tasktype: StrictStr | None = Field(
        None, max_length=64, validation_alias=_alias("taskType", "tasktype")
    )
    prodsourcelabel: StrictStr | None = Field(
        None,
        max_length=20,
        validation_alias=_alias("prodSourceLabel", "prodsourcelabel"),
    )
    transhome: StrictStr | None = Field(
        None, max_length=128, validation_alias=_alias("transHome", "transhome")
    )
    transuses: StrictStr | None = Field(
        None, max_length=64, validation_alias=_alias("transUses", "transuses")
    )
    transpath: StrictStr | None = Field(
        None, max_length=128, validation_alias=_alias("transPath", "transpath")
    )
    architecture: StrictStr | None = Field(
        None, max_length=256, validation_alias=_alias("architecture")
    )
    corecount: StrictInt | None = Field(
        None, gt=0, le=1024, validation_alias=_alias("coreCount", "corecount")
    )
    workinggroup: StrictStr | None = Field(
        None, max_length=32, validation_alias=_alias("workingGroup", "workinggroup")
    )
    campaign: StrictStr | None = Field(
        None, max_length=32, validation_alias=_alias("campaign")
    )
    username: StrictStr | None = Field(
        None, max_length=128, validation_alias=_alias("userName", "username")
    )
    n_input_datasets: StrictInt | None = Field(
        None,
        ge=0,
        le=MAX_BIGINT,
        validation_alias=_alias("nInputDatasets", "n_input_datasets"),
    )
    nfiles_sum: StrictInt | None = Field(
        None,
        ge=0,
        le=MAX_BIGINT,
        validation_alias=_alias("nFiles", "nfiles_sum", "nfiles"),
    )
    nevents_sum: StrictInt | None = Field(
        None,
        ge=0,
        le=MAX_BIGINT,
        validation_alias=_alias("nEvents", "nevents_sum", "nevents"),
    )
    input_datasets: list[InputDataset] | None = Field(
        None, validation_alias=_alias("inDS", "input_datasets")
    )
    job_parameters: list[Any] | None = Field(
        None, validation_alias=_alias("jobParameters")
    )
    creationdate: datetime | None = Field(
        None, validation_alias=_alias("creationDate", "creationdate")
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_ignored(cls, data: Any) -> Any:
        """Drop PanDA keys that do not describe resources (see IGNORED_PANDA_KEYS)."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in IGNORED_PANDA_KEYS}
        return data

    @field_validator("creationdate")
    @classmethod
    def _naive_utc_in_range(cls, value: datetime | None) -> datetime | None:
        """Return the date as naive UTC, refusing dates outside PanDA's era.

        Converting here, once, means no later step can overflow on a time zone.
        """
        if value is None:
            return None
        try:
            if value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:
            value = datetime.min
        if not EARLIEST_CREATION <= value < LATEST_CREATION:
            raise PydanticCustomError("datetime_range", "date out of range")
        return value

    @field_validator("input_datasets", mode="before")
    @classmethod
    def _names_to_datasets(cls, value: Any) -> Any:
        """Accept bare dataset names (a list, or one comma-separated string)."""
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    def counts(self) -> tuple[float, float, float]:
        """Return (input datasets, files, events); NaN where unknown.

        Totals win over per-dataset counts; without ``inDS`` the input templates of
        ``jobParameters`` (``param_type: input``) count the input datasets.
        """
        n_ds: float = np.nan if self.n_input_datasets is None else self.n_input_datasets
        files: float = np.nan if self.nfiles_sum is None else self.nfiles_sum
        events: float = np.nan if self.nevents_sum is None else self.nevents_sum
        if self.input_datasets is not None:
            dss = self.input_datasets
            if self.n_input_datasets is None:
                n_ds = len(self.input_datasets)
            known_f = [d.nfiles for d in dss if d.nfiles is not None]
            known_e = [d.nevents for d in dss if d.nevents is not None]
            if self.nfiles_sum is None and known_f:
                files = float(sum(known_f))
            if self.nevents_sum is None and known_e:
                events = float(sum(known_e))
        elif self.job_parameters is not None and self.n_input_datasets is None:
            n_ds = sum(
                1
                for p in self.job_parameters
                if isinstance(p, dict) and p.get("param_type") == "input"
            )
        return float(n_ds), float(files), float(events)


_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "string_type": "a string",
    "list_type": "a list",
    "datetime_type": "an ISO 8601 date and time",
    "datetime_parsing": "an ISO 8601 date and time",
    "datetime_from_date_parsing": "an ISO 8601 date and time",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dict_type": "an object",
    "datetime_range": (
        f"a date and time from {EARLIEST_CREATION:%Y-%m-%d} to before "
        f"{LATEST_CREATION:%Y-%m-%d} (UTC)"
    ),
}


def _expected(err: dict[str, Any], field: str) -> str:
    kind = err["type"]
    ctx = err.get("ctx", {})
    if kind == "greater_than" and ctx.get("gt") == 0:
        return "a positive integer"
    if kind == "greater_than_equal" and ctx.get("ge") == 0:
        return "a non-negative integer"
    if kind == "less_than_equal":
        return f"at most {ctx.get('le')}"
    if kind == "string_too_long":
        return f"a string of at most {ctx.get('max_length')} characters"
    if kind == "extra_forbidden":
        if any(
            field in f.validation_alias.choices  # type: ignore[union-attr]
            for f in TaskDefinition.model_fields.values()
        ):
            return "given once (it was given under two names)"
        return (
            "a known task field, such as processingType, transPath, transHome, "
            "transUses, coreCount, prodSourceLabel, nFiles, nEvents or inDS "
            "(see docs/for-scientists.md)"
        )
    return _EXPECTED.get(kind, err["msg"].replace("Input should be", "").strip())


def _error_message(err: dict[str, Any], prefix: str) -> tuple[str, str]:
    loc = [str(p) for p in err["loc"]]
    field = ".".join(loc) or "task"
    got = err.get("input")
    shown = repr(got)
    if err["type"] == "extra_forbidden":
        duplicate = "given once" in _expected(err, loc[-1])
        shown = "it twice" if duplicate else "an unknown field"
    if isinstance(got, str) and len(got) > 60:
        shown = repr(got[:57] + "...")
    elif len(shown) > 60:  # a 400-digit number, a huge list: show its start only
        shown = shown[:57] + "..."
    message = (
        f"The '{field}' field{prefix} must be {_expected(err, loc[-1] if loc else '')}."
        f" Got {shown} instead."
    )
    return message, field


def parse_task_definitions(data: Any) -> list[TaskDefinition]:
    """Validate one task definition (a mapping) or a non-empty list of them.

    Raises :class:`TaskDefinitionError` for the first problem found; its message
    names the field (with the task's position when a list was given).
    """
    many = isinstance(data, list)
    items = data if many else [data]
    if many and not items:
        raise TaskDefinitionError(
            "The 'tasks' field must be a task definition or a non-empty list of them. "
            "Got an empty list instead.",
            "tasks",
        )
    if len(items) > MAX_TASKS:
        raise TaskDefinitionError(
            f"The 'tasks' field must hold at most {MAX_TASKS} task definitions. "
            f"Got {len(items)} instead.",
            "tasks",
        )
    out = []
    for i, item in enumerate(items):
        prefix = f" of task {i}" if many else ""
        if not isinstance(item, dict):
            raise TaskDefinitionError(
                f"The 'task' field{prefix} must be an object of task fields. "
                f"Got {type(item).__name__} instead.",
                "task",
            )
        try:
            out.append(TaskDefinition.model_validate(item))
        except ValidationError as exc:
            message, field = _error_message(dict(exc.errors()[0]), prefix)
            raise TaskDefinitionError(message, field) from None
    return out


def task_records(
    definitions: Sequence[TaskDefinition], now: datetime | None = None
) -> list[dict[str, Any]]:
    """Return one TASK_COLUMNS record per definition (the predictor's fast input).

    A definition without ``jediTaskID`` gets its position in the list as id; one
    without ``creationDate`` is created ``now`` (UTC), which is what the recent
    history index assumes too.
    """
    stamp = now or datetime.now(UTC).replace(tzinfo=None)
    records = []
    for i, d in enumerate(definitions):
        n_ds, files, events = d.counts()
        created = d.creationdate or stamp
        if created.tzinfo is not None:
            created = created.astimezone(UTC).replace(tzinfo=None)
        records.append(
            {
                "jeditaskid": d.jeditaskid if d.jeditaskid is not None else i,
                "creationdate": created,
                "processingtype": d.processingtype,
                "tasktype": d.tasktype,
                "prodsourcelabel": d.prodsourcelabel,
                "transhome": d.transhome,
                "transuses": d.transuses,
                "transpath": d.transpath,
                "architecture": d.architecture,
                "corecount": np.nan if d.corecount is None else float(d.corecount),
                "workinggroup": d.workinggroup,
                "campaign": d.campaign,
                "username": d.username,
                "n_input_datasets": n_ds,
                "nfiles_sum": files,
                "nevents_sum": events,
            }
        )
    return records


def tasks_frame(
    definitions: Sequence[TaskDefinition], now: datetime | None = None
) -> pd.DataFrame:
    """Return the tasks frame (TASK_COLUMNS) of ``definitions``, one row each."""
    frame = pd.DataFrame(task_records(definitions, now), columns=list(TASK_COLUMNS))
    frame["creationdate"] = pd.to_datetime(frame["creationdate"])
    return frame


def read_task_definitions(data: Any, now: datetime | None = None) -> pd.DataFrame:
    """Validate ``data`` (see :func:`parse_task_definitions`) and return its frame."""
    return tasks_frame(parse_task_definitions(data), now)


__all__ = [
    "IGNORED_PANDA_KEYS",
    "MAX_TASKS",
    "InputDataset",
    "TaskDefinition",
    "TaskDefinitionError",
    "parse_task_definitions",
    "read_task_definitions",
    "task_records",
    "tasks_frame",
]
