"""The ``scout_prediction`` message, version 1: one predicted JEDI task for JEDI.

This model is the single source of truth of the message: the JSON Schema file
``panda_predictor/resources/scout_prediction.schema.json`` is generated from it
(:func:`json_schema`, checked by the tests) and docs/scout-prediction-message.md shows
both. Field names of the values are JediTaskSpec's attributes (``ramCount``/
``ramUnit``, ``cpuTime``/``cpuTimeUnit``, ``ioIntensity``/``ioIntensityUnit``,
``walltime``/``walltimeUnit``), so JEDI can set them on a task spec as they come.

A message is built from a
:class:`~panda_predictor.core.domain.task_prediction.TaskPrediction` by
:func:`from_prediction` and read back by :func:`parse_message`, which raises
:class:`MessageError` naming the task id when the body holds one.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.core.domain.units import database_value

#: The ``msg_type`` JEDI's AIParameterAdjuster dispatches on.
MSG_TYPE: Literal["scout_prediction"] = "scout_prediction"
#: Version of this message; a consumer refuses any other major version, and a
#: minor version only adds optional fields (1.1: ``early_remeasure``).
SCHEMA_VERSION = "1.1"
#: Our target name -> (JediTaskSpec value attribute, unit attribute).
PANDA_NAMES: dict[str, tuple[str, str]] = {
    "ramcount": ("ramCount", "ramUnit"),
    "cputime": ("cpuTime", "cpuTimeUnit"),
    "iointensity": ("ioIntensity", "ioIntensityUnit"),
    "walltime": ("walltime", "walltimeUnit"),
}
#: The units PanDA stores for each value attribute.
ALLOWED_UNITS: dict[str, tuple[str, ...]] = {
    "ramCount": ("MBPerCore", "MBPerCoreFixed"),
    "cpuTime": (
        "HS06sPerEvent",
        "HS06sPerEventFixed",
        "mHS06sPerEvent",
        "mHS06sPerEventFixed",
    ),
    "ioIntensity": ("kBPerS",),
    "walltime": ("kSI2kseconds",),
}
#: Largest value a JEDI_TASKS integer column holds.
MAX_INT = 2_147_483_647


class MessageError(ValueError):
    """A message that is not a valid scout_prediction; ``task_id`` if it had one."""

    def __init__(self, message: str, task_id: int | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id


class ModelRef(BaseModel):
    """The registered model that made the prediction."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=128, description="Model name.")
    version: str = Field(min_length=1, max_length=64, description="Model version.")


class Values(BaseModel):
    """Predicted values in PanDA's stored form, named as JediTaskSpec's attributes.

    Each value comes with its unit; a target not predicted is absent (null).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ramCount: int | None = Field(
        None, ge=1, le=MAX_INT, description="JEDI_TASKS.RAMCOUNT"
    )  # noqa: N815
    ramUnit: Literal["MBPerCore", "MBPerCoreFixed"] | None = None  # noqa: N815
    cpuTime: int | None = Field(
        None, ge=1, le=MAX_INT, description="JEDI_TASKS.CPUTIME"
    )  # noqa: N815
    cpuTimeUnit: (  # noqa: N815
        Literal[
            "HS06sPerEvent",
            "HS06sPerEventFixed",
            "mHS06sPerEvent",
            "mHS06sPerEventFixed",
        ]
        | None
    ) = None
    ioIntensity: int | None = Field(  # noqa: N815
        None, ge=0, le=MAX_INT, description="JEDI_TASKS.IOINTENSITY"
    )
    ioIntensityUnit: Literal["kBPerS"] | None = None  # noqa: N815
    walltime: int | None = Field(
        None, ge=0, le=MAX_INT, description="JEDI_TASKS.WALLTIME"
    )
    walltimeUnit: Literal["kSI2kseconds"] | None = None  # noqa: N815

    @model_validator(mode="after")
    def _value_with_unit(self) -> Values:
        for value_name in ALLOWED_UNITS:
            unit_name = unit_of(value_name)
            has_value = getattr(self, value_name) is not None
            has_unit = getattr(self, unit_name) is not None
            if has_value != has_unit:
                raise ValueError(
                    f"The '{value_name}' and '{unit_name}' fields must be given "
                    f"together. Got only '{value_name if has_value else unit_name}' "
                    "instead."
                )
        return self

    def items(self) -> list[tuple[str, int, str]]:
        """Return ``(value attribute, value, unit)`` of every predicted target."""
        out = []
        for value_name in ALLOWED_UNITS:
            value = getattr(self, value_name)
            if value is not None:
                out.append(
                    (value_name, int(value), str(getattr(self, unit_of(value_name))))
                )
        return out


def unit_of(value_name: str) -> str:
    """Return the JediTaskSpec unit attribute of a value attribute."""
    return "ramUnit" if value_name == "ramCount" else f"{value_name}Unit"


class ScoutPrediction(BaseModel):
    """A ``scout_prediction`` message: a task's predicted resources and the decision."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title="scout_prediction",
        json_schema_extra={
            "$id": "https://github.com/PanDAWMS/panda-predictor/scout_prediction-1.json",
            "description": "Predicted resources of one JEDI task, sent at submission "
            "so JEDI can skip the task's scout jobs (AIParameterAdjuster).",
        },
    )

    msg_type: Literal["scout_prediction"] = Field(
        description="Always scout_prediction."
    )
    schema_version: str = Field(
        pattern=r"^1\.\d+$", description="Message version, major.minor; major is 1."
    )
    task_id: int = Field(ge=1, description="JEDI_TASKS.JEDITASKID.")
    idempotency_key: str = Field(
        min_length=8,
        max_length=128,
        pattern=r"^[A-Za-z0-9:._-]+$",
        description="Same key, same content: a consumer applies a key at most once.",
    )
    created_at: datetime = Field(description="When the prediction was made (UTC).")
    expires_at: datetime = Field(
        description="After this instant (UTC) the message must not be applied."
    )
    decision: Literal["applied", "kept_scouts"] = Field(
        description="applied: write the values and skip the scouts; kept_scouts: "
        "change nothing, scouts run."
    )
    reason: str = Field(max_length=400, description="Why, in a few words.")
    model: ModelRef
    values: Values = Field(description="Values to write, as JediTaskSpec names them.")
    confidence: dict[str, float] = Field(
        default_factory=dict,
        description="Probability of the predicted class, per value attribute.",
    )
    early_remeasure: bool = Field(
        default=False,
        description="applied only: have PanDA re-measure the task once its first "
        "3 jobs are settled (finished, or lost), as its scouts would have been "
        "(its values, or one target's for every task, are the scouts' own first "
        "values; since 1.1, sent only when true).",
    )

    @field_validator("created_at", "expires_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("must carry a time zone (UTC, e.g. 2026-12-01T20:00:00Z)")
        return value.astimezone(UTC)

    @field_validator("confidence")
    @classmethod
    def _probabilities(cls, value: dict[str, float]) -> dict[str, float]:
        for name, probability in value.items():
            if name not in ALLOWED_UNITS:
                raise ValueError(
                    f"keys must be among {list(ALLOWED_UNITS)}; got {name!r}"
                )
            if not 0.0 <= probability <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]; got {probability!r}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ScoutPrediction:
        if self.expires_at <= self.created_at:
            raise ValueError("expires_at must be after created_at")
        if self.decision == "applied" and not self.values.items():
            raise ValueError("an applied prediction must carry at least one value")
        if self.early_remeasure and self.decision != "applied":
            raise ValueError(
                f"early_remeasure must be false unless the decision is applied; "
                f"got true with {self.decision!r}"
            )
        return self

    def expired(self, now: datetime | None = None) -> bool:
        """Return whether the message must no longer be applied."""
        return (now or datetime.now(UTC)) >= self.expires_at

    def to_json(self) -> str:
        """Return the message body: compact JSON, nulls left out, and
        ``early_remeasure`` only when true (a 1.0 consumer refuses unknown
        fields, so a message that does not need it reads as 1.0 did)."""
        left_out = None if self.early_remeasure else {"early_remeasure"}
        return self.model_dump_json(exclude_none=True, exclude=left_out)


def idempotency_key(
    task_id: int,
    model: tuple[str, str],
    decision: str,
    values: dict[str, Any],
    early_remeasure: bool = False,
) -> str:
    """Return the key of a prediction: the same content always gives the same key.

    A republished prediction (the hook retried after a lost receipt) so carries the
    key of the first copy, and a consumer applies it once. ``early_remeasure``
    counts only when true, so a message without it keeps its 1.0 key.
    """
    parts: list[Any] = [task_id, model[0], model[1], decision, sorted(values.items())]
    if early_remeasure:
        parts.append("early_remeasure")
    content = json.dumps(parts, separators=(",", ":"))
    return f"{task_id}-{hashlib.sha256(content.encode()).hexdigest()[:24]}"


def from_prediction(
    prediction: TaskPrediction,
    ttl_seconds: float,
    fixed_units: bool | None = None,
    now: datetime | None = None,
) -> ScoutPrediction:
    """Return the message of a decided task (``applied`` or ``kept_scouts``).

    Parameters
    ----------
    prediction:
        The task's prediction and decision.
    ttl_seconds:
        Seconds after ``now`` the message expires.
    fixed_units:
        Send the ``...Fixed`` units (the ``fixed_units`` setting: True always,
        False never, None as each target's predicted unit says).
    now:
        Creation time (UTC); default: the current time.
    """
    if prediction.decision not in ("applied", "kept_scouts"):
        raise ValueError(
            "The 'decision' field must be 'applied' or 'kept_scouts' to be published. "
            f"Got {prediction.decision!r} instead."
        )
    created = now or datetime.now(UTC)
    values: dict[str, Any] = {}
    confidence: dict[str, float] = {}
    for name, target in prediction.targets.items():
        value_name, unit_name = PANDA_NAMES[name]
        values[value_name], values[unit_name] = database_value(target, fixed_units)
        confidence[value_name] = round(float(target.confidence), 4)
    model = (prediction.model_name, str(prediction.model_version))
    early = prediction.early_remeasure and prediction.decision == "applied"
    return ScoutPrediction(
        msg_type=MSG_TYPE,
        schema_version=SCHEMA_VERSION,
        task_id=prediction.jeditaskid,
        idempotency_key=idempotency_key(
            prediction.jeditaskid, model, prediction.decision, values, early
        ),
        created_at=created,
        expires_at=created + timedelta(seconds=ttl_seconds),
        decision=prediction.decision,
        reason=prediction.reason[:400],
        model=ModelRef(name=model[0][:128], version=model[1][:64]),
        values=Values(**values),
        confidence=confidence,
        early_remeasure=early,
    )


def _task_id_of(data: Any) -> int | None:
    if isinstance(data, dict):
        try:
            return int(data.get("task_id"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
    return None


def parse_message(body: str | bytes | dict[str, Any]) -> ScoutPrediction:
    """Return the message in ``body`` (JSON text or a decoded dict), validated.

    Raises
    ------
    MessageError
        Not JSON, not an object, another msg_type or version, or a field out of its
        schema; the error names every problem and carries the task id if found.
    """
    data: Any = body
    if isinstance(body, bytes | str):
        try:
            # pydantic's own JSON parser reads and validates a good message in one
            # pass (27 us against 41 us); any problem takes the path below, which
            # names it exactly as before.
            return ScoutPrediction.model_validate_json(body)
        except ValidationError:
            pass
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MessageError(
                f"The message must be JSON. Got a parse error instead: {exc}"
            ) from None
    task_id = _task_id_of(data)
    if not isinstance(data, dict):
        raise MessageError(
            f"The message must be a JSON object. Got {type(data).__name__} instead."
        )
    try:
        return ScoutPrediction.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'message'}: "
            f"{err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        raise MessageError(
            f"The message must follow the scout_prediction schema "
            f"{SCHEMA_VERSION}. Got: {problems}",
            task_id,
        ) from None


def json_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of the message."""
    schema = ScoutPrediction.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def json_schema_text() -> str:
    """Return the JSON Schema as the text of the packaged schema file."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
