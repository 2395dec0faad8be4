"""Typed settings of panda-predictor, in one place.

Every setting has a default and a one-line description. Values come, from lowest to
highest priority, from the defaults below, a YAML config file (``--config`` or
``PANDA_PREDICTOR_CONFIG``, read by :mod:`panda_predictor.config_file`) and
environment variables prefixed ``PANDA_PREDICTOR_`` (``PANDA_PREDICTOR_DB_URL``,
...). MLflow's own ``MLFLOW_TRACKING_URI`` is honoured. Nothing is read at import
time: call :func:`get_settings`.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from panda_predictor.config_file import (
    CONFIG_ENV,
    ConfigFileError,
    YamlSource,
    read_config_file,
)
from panda_predictor.errors import UserInputError

ENV_PREFIX = "PANDA_PREDICTOR_"

#: Default PanDA schema per SQL dialect, where PanDA installs it.
DEFAULT_SCHEMAS = {"postgresql": "doma_panda", "oracle": "ATLAS_PANDA", "sqlite": None}
#: PanDA's schema of the job archive (``schemaPANDAARCH``) per dialect.
DEFAULT_ARCHIVE_SCHEMAS = {
    "postgresql": "doma_pandaarch",
    "oracle": "ATLAS_PANDAARCH",
    "sqlite": None,
}


class SettingsError(UserInputError):
    """A setting or the config file is invalid; the message names it and the fix."""


class Settings(BaseSettings):
    """All settings; build with :func:`get_settings`, not directly."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    home: Path = Field(
        Path("var"),
        description="Folder for the embedded default: SQLite database, MLflow store, "
        "model cache and reports.",
    )
    db_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the PanDA database; default: SQLite file "
        "<home>/panda.sqlite.",
    )
    db_schema: str | None = Field(
        None,
        description="Schema holding PanDA's tables; default per dialect: doma_panda "
        "(PostgreSQL), ATLAS_PANDA (Oracle), none (SQLite). '' means none.",
    )
    plugin_schema: str | None = Field(
        None,
        description="Schema for panda-predictor's own tables; default: db_schema.",
    )
    db_archive_schema: str | None = Field(
        None,
        description="Schema of PanDA's job archive JOBSARCHIVED, read with "
        "JOBSARCHIVED4 where it exists; default: db_schema if set, else per "
        "dialect doma_pandaarch (PostgreSQL), ATLAS_PANDAARCH (Oracle), none "
        "(SQLite). '' means none.",
    )
    mlflow_tracking_uri: str | None = Field(
        None,
        validation_alias=AliasChoices(
            "mlflow_tracking_uri",
            f"{ENV_PREFIX}MLFLOW_TRACKING_URI",
            "MLFLOW_TRACKING_URI",
        ),
        description="MLflow tracking and registry URI; default: SQLite store "
        "<home>/mlflow.db with artifacts in <home>/mlartifacts.",
    )
    model_name: str = Field(
        "panda-predictor",
        description="Name of the registered MLflow model; each version is a bundle of "
        "the four target models.",
    )
    model_cache_dir: Path | None = Field(
        None,
        description="Local copy of the champion models, used when the registry is "
        "unreachable; default: <home>/model-cache.",
    )
    registry_timeout_seconds: int = Field(
        2,
        ge=1,
        description="Seconds MLflow waits for one HTTP answer of the registry "
        "(MLFLOW_HTTP_REQUEST_TIMEOUT); MLflow's own default is 120.",
    )
    registry_max_retries: int = Field(
        1,
        ge=0,
        description="Retries of a failed registry HTTP request "
        "(MLFLOW_HTTP_REQUEST_MAX_RETRIES); MLflow's own default is 7.",
    )
    registry_backoff_factor: int = Field(
        0,
        ge=0,
        description="Seconds of exponential back-off between registry retries "
        "(MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR); MLflow's own default is 2.",
    )
    gate_promote_incomparable: bool = Field(
        False,
        description="Promote a new model whose champion cannot be scored on the "
        "same test data (other features or bins); default: make it challenger.",
    )
    gate_max_accuracy_drop: float = Field(
        0.005,
        ge=0.0,
        le=1.0,
        description="How much lower than the champion's a new model's mean accuracy "
        "may be (beyond the test set's noise) and still be promoted.",
    )
    gate_max_tail_recall_drop: float = Field(
        0.01,
        ge=0.0,
        le=1.0,
        description="How much lower than the champion's a new model's tail recall "
        "(per target) may be, beyond the noise, and still be promoted.",
    )
    gate_max_under_allocation_rise: float = Field(
        0.005,
        ge=0.0,
        le=1.0,
        description="How much higher than the champion's a new model's "
        "under-allocation rate (per target) may be, beyond the noise.",
    )
    gate_max_delay_share: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="Largest share of the test tasks a new model may leave to their "
        "scouts (bulk delay at most a fifth of the scouts'), beyond the noise.",
    )
    gate_floor_noise_factor: float = Field(
        1.0,
        ge=-1.0,
        description="Lead over the floors (majority class, best recency rule) a new "
        "model needs, in noise half-widths: 1 a lead chance does not explain, 0 any "
        "lead, -1 only not clearly below (test sets too small to tell).",
    )
    gate_max_waste_rise: float = Field(
        0.0,
        ge=0.0,
        description="How much more waste per job than the scouts' (as a fraction of "
        "theirs: 0.5 is half again) a new model's replay may show per target, beyond "
        "the noise; 0 is no more than the scouts.",
    )
    bins_file: Path | None = Field(
        None,
        description="YAML file with the class edges per target; default: the "
        "packaged panda_predictor/resources/bins.yaml.",
    )
    confidence_threshold: float | None = Field(
        None,
        description="Replaced by delay_price (scouts are kept where skipping them is "
        "expected to cost more, docs/decisions.md); setting it is refused.",
    )
    gate_tail_recall_shortfall: float | None = Field(
        None,
        description="Replaced by the gate's replay goals (failed jobs and waste at "
        "most the scouts', gate_max_delay_share; docs/model-registry.md); setting "
        "it is refused.",
    )
    gate_max_short_share: float | None = Field(
        None,
        description="Replaced by the gate's replay goals (failed jobs and waste at "
        "most the scouts'; docs/model-registry.md); setting it is refused.",
    )
    delay_price: float | None = Field(
        None,
        ge=0.0,
        description="Core-hours that one core-hour of a job's delay is worth: a task "
        "skips its scouts where its written values are expected to cost less than "
        "the scouts' delay. Default: the price (or the scouts' own value) its model "
        "chose per target on its validation part.",
    )
    tail_recall_target: float = Field(
        0.95,
        gt=0.0,
        le=1.0,
        description="Recall that the decision rules must reach on the largest "
        "class of each target (tuned on validation data).",
    )
    fixed_units: bool | None = Field(
        None,
        description="true: write ...Fixed units (MBPerCoreFixed, HS06sPerEventFixed) "
        "so PanDA's re-measurement after 5 and 100 jobs never overwrites the "
        "prediction; false: never; unset (default): where the model chose it on its "
        "validation part (`fixed_targets`, printed by `train`). The database hook "
        "fixes ramcount only (PanDA reads a Fixed cputime from the task parameters).",
    )
    hook_batch_size: int = Field(200, gt=0, description="Tasks per hook transaction.")
    write_lock_timeout_seconds: float = Field(
        1.0,
        gt=0,
        description="PostgreSQL: longest a write-back transaction waits for any "
        "lock (SET LOCAL lock_timeout); rows JEDI locks are skipped, never waited for.",
    )
    never_below_preset: bool = Field(
        False,
        description="Never write a ramcount, cputime or iointensity below the "
        "requester's preset value: that preset stays (audited), the rest is written.",
    )
    hook_poll_seconds: float = Field(
        10.0, gt=0, description="Pause between passes of 'hook --watch'."
    )
    early_remeasure: bool | Literal["auto"] = Field(
        "auto",
        description="Training ('train', 'retrain', 'benchmark') sizes for the early "
        "re-measurement: a task written its scouts' own first values (the request, "
        "else the default, on every target PanDA re-measures), and every task "
        "beside a target written its scouts' value for all tasks, is re-measured "
        "once its first 3 jobs are settled, as its scouts would have been, and the "
        "prices "
        "are tuned with it. The champion carries the choice; the hook marks such "
        "tasks when it writes them and asks PanDA after a pass (WALLTIMEUNIT set to "
        "NULL, as PanDA's requestTaskParameterRecalculation does). 'auto': each "
        "training chooses it on its validation part with the prices: on where, "
        "with it, no price beats the scouts' own value (those tasks then replay "
        "as the scouts do) or it fares better on the worst target; a set "
        "delay_price leaves it off. 'auto' by default: on the job logs it meets "
        "more goals than off, giving up part of some savings (docs/decisions.md).",
    )
    mode: Literal["predict", "legacy", "shadow"] = Field(
        "predict",
        description="'legacy' is the kill switch: predict nothing, scouts run. "
        "'shadow' predicts and audits every task (decision 'shadow') but writes "
        "nothing to JEDI: scouts run.",
    )
    rollout_share: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Share of tasks (by a sha256 hash of jediTaskID) whose "
        "predictions are applied in mode 'predict'; the rest keep their scouts, "
        "audited 'held_back'.",
    )
    kill_switch_file: Path | None = Field(
        None,
        description="If this file exists, every hook behaves as in mode=legacy.",
    )
    output: Literal["database", "publish", "both"] = Field(
        "database",
        description="Where the hook sends a decided task: 'database' writes "
        "JEDI_TASKS, 'publish' sends a scout_prediction message to the broker for "
        "JEDI's AIParameterAdjuster, 'both' does both.",
    )
    broker_host: str = Field(
        "127.0.0.1", description="STOMP broker host of the 'publish' output."
    )
    broker_port: int = Field(
        61613, gt=0, lt=65536, description="STOMP port of the broker."
    )
    broker_destination: str = Field(
        "/queue/panda_predictor.scout_prediction",
        description="STOMP destination JEDI's AIParameterAdjuster listens on.",
    )
    broker_username: str | None = Field(
        None, description="STOMP login; None sends no login header."
    )
    broker_passcode: str | None = Field(
        None,
        description="STOMP passcode; set it in the environment "
        "(PANDA_PREDICTOR_BROKER_PASSCODE), never in a file.",
    )
    broker_vhost: str = Field(
        "/",
        description="Virtual host sent as the STOMP CONNECT 'host' header "
        "(RabbitMQ's vhost; ActiveMQ ignores it).",
    )
    broker_receipt_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="How long the publisher waits for the broker's receipts of a "
        "batch before it reconnects and sends the missing messages again.",
    )
    broker_retry_seconds: float = Field(
        60.0,
        ge=0,
        description="How long the publisher keeps reconnecting to a lost broker "
        "before the pass fails open (tasks left unaudited, published next pass).",
    )
    message_ttl_seconds: float = Field(
        3600.0,
        gt=0,
        description="A published scout_prediction expires this long after it was "
        "made; JEDI's plugin refuses it afterwards.",
    )
    api_token: str | None = Field(
        None,
        description="Bearer token required for write requests to the HTTP service.",
    )
    http_max_waiting_requests: int = Field(
        10,
        gt=0,
        description="HTTP service: above this many requests waiting for a worker "
        "thread, new ones get 503 with Retry-After at once (load shedding).",
    )
    http_drain_seconds: float = Field(
        20.0,
        ge=0,
        description="HTTP service: on SIGTERM, how long requests already received "
        "may take to finish before the server stops anyway.",
    )
    # The JEDI refiner runs inside JEDI, which builds it with no arguments of ours: it
    # reads these (like every setting) through load_settings, so the environment
    # variables PANDA_PREDICTOR_REFINER_* configure it without a config file.
    refiner_url: str | None = Field(
        None,
        description="JEDI refiner: base URL of a panda-predictor HTTP service to ask "
        "(HTTP mode); unset or empty: the refiner loads the champion in-process.",
    )
    refiner_timeout: float = Field(
        2.0,
        gt=0,
        description="JEDI refiner, HTTP mode: total seconds one prediction may take "
        "before the task keeps its scouts.",
    )
    refiner_reload_seconds: float = Field(
        600.0,
        gt=0,
        description="JEDI refiner, in-process mode: seconds between looks for a newly "
        "promoted champion.",
    )
    refiner_history_refresh_seconds: float = Field(
        300.0,
        ge=0,
        allow_inf_nan=False,
        description="JEDI refiner, in-process mode: seconds between background reads "
        "of the recent history from db_url, for the history features and the expert "
        "combination, as 'serve --history-refresh' (0: off, history features NaN).",
    )
    operator: str | None = Field(
        None,
        description="Who acts, recorded on a manual 'model promote' or 'model "
        "rollback' (tag manual.by); unset or empty: the login name.",
    )
    # The drift bounds are DriftThresholds' own, so a bad value fails here, in the
    # settings' one-line error, not later inside a drift check.
    drift_psi_threshold: float = Field(
        0.2,
        gt=0,
        description="PSI above its noise level on an alarm feature or a target's "
        "predicted classes means drift.",
    )
    drift_unseen_share_threshold: float = Field(
        0.10,
        gt=0,
        le=1,
        description="Share of recent tasks with a never-seen value of an alarm "
        "category that means drift.",
    )
    drift_under_allocation_factor: float = Field(
        2.0,
        gt=0,
        description="Feedback under-allocation above this multiple of the model's "
        "test rate means drift.",
    )
    drift_accuracy_drop: float = Field(
        0.15,
        gt=0,
        le=1,
        description="Feedback accuracy this far below the test accuracy means drift.",
    )
    drift_min_tasks: int = Field(
        50, gt=0, description="Fewer recent tasks or scored outcomes: no verdict."
    )
    drift_psi_features: list[str] = Field(
        default_factory=lambda: [
            "processingtype",
            "framework",
            "transpath",
            "corecount",
            "nevents_sum",
        ],
        description="Features whose PSI can raise the drift alarm.",
    )
    drift_unseen_features: list[str] = Field(
        default_factory=lambda: [
            "processingtype",
            "framework",
            "transhome",
            "transpath",
        ],
        description="Categorical features whose unseen share can raise the alarm.",
    )
    retrain_window_months: int = Field(
        12, gt=0, description="Months of history before this month that retrain uses."
    )
    predict_cache_seconds: float = Field(
        3600.0,
        ge=0,
        description="How long 'predict' serves the local copy of the champion "
        "without asking the registry, after the registry last confirmed it (0: "
        "always ask). Hooks and the service always ask.",
    )
    log_level: str = Field(
        "INFO", description="Python logging level: DEBUG, INFO, WARNING or ERROR."
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        description="Log lines as text for people or JSON objects for log collectors.",
    )

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        """Refuse a level logging does not know here, not as a traceback later."""
        from panda_predictor.log_format import LOG_LEVELS

        name = str(value).strip().upper()
        if name not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return name

    @field_validator(
        "refiner_timeout",
        "refiner_reload_seconds",
        "refiner_history_refresh_seconds",
        mode="before",
    )
    @classmethod
    def _blank_refiner_seconds(cls, value: Any, info: ValidationInfo) -> Any:
        """Read an empty variable as the default, as the refiner did before these
        were settings, so a unit file with ``PANDA_PREDICTOR_REFINER_TIMEOUT=`` keeps
        working."""
        if isinstance(value, str) and not value.strip():
            assert info.field_name is not None
            return cls.model_fields[info.field_name].default
        return value

    @field_validator("confidence_threshold")
    @classmethod
    def _replaced_threshold(cls, value: float | None) -> None:
        """Refuse the old threshold rather than ignore it silently."""
        if value is not None:
            raise ValueError(
                "was replaced by 'delay_price': scouts are now kept where skipping "
                "them is expected to cost more than running them (docs/decisions.md)"
                "; remove it, or set delay_price (core-hours one core-hour of delay "
                f"is worth). Got {value!r}"
            )
        return None

    @field_validator("gate_tail_recall_shortfall", "gate_max_short_share")
    @classmethod
    def _replaced_gate_floor(cls, value: float | None) -> None:
        """Refuse an old gate floor rather than ignore it silently."""
        if value is not None:
            raise ValueError(
                "was replaced by the gate's replay goals: a model's decision, "
                "replayed on the test tasks under PanDA's rules, must fail no more "
                "jobs and waste no more hours than the scouts per target, and keep "
                "scouts for at most gate_max_delay_share of the tasks "
                f"(docs/model-registry.md); remove it. Got {value!r}"
            )
        return None

    def database_url(self) -> str:
        """Return the database URL, defaulting to the SQLite file under ``home``."""
        if self.db_url:
            return self.db_url
        return f"sqlite:///{(self.home / 'panda.sqlite').as_posix()}"

    def tracking_uri(self) -> str:
        """Return the MLflow tracking URI (default: SQLite store under ``home``)."""
        if self.mlflow_tracking_uri:
            return self.mlflow_tracking_uri
        return f"sqlite:///{(self.home / 'mlflow.db').resolve().as_posix()}"

    def artifact_root(self) -> str:
        """Return where a local MLflow store keeps its artifacts."""
        return (self.home / "mlartifacts").resolve().as_uri()

    def cache_dir(self) -> Path:
        """Return the folder of the local champion-model cache."""
        return self.model_cache_dir or self.home / "model-cache"

    def schema_for(self, dialect: str) -> str | None:
        """Return the PanDA schema to use on ``dialect`` ('' in settings means none)."""
        if self.db_schema is not None:
            return self.db_schema or None
        return DEFAULT_SCHEMAS.get(dialect)

    def archive_schema_for(self, dialect: str) -> str | None:
        """Return the schema of PanDA's job archive (JOBSARCHIVED) on ``dialect``."""
        if self.db_archive_schema is not None:
            return self.db_archive_schema or None
        if self.db_schema is not None:
            # A database built from sql/ keeps the archive beside JOBSARCHIVED4.
            return self.db_schema or None
        return DEFAULT_ARCHIVE_SCHEMAS.get(dialect)

    def plugin_schema_for(self, dialect: str) -> str | None:
        """Return the schema of the plugin's own tables on ``dialect``."""
        if self.plugin_schema is not None:
            return self.plugin_schema or None
        return self.schema_for(dialect)


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Build settings from defaults, a YAML config file, the environment and overrides.

    Parameters
    ----------
    config_file:
        YAML file of settings; default: the file named by ``PANDA_PREDICTOR_CONFIG``.
    overrides:
        Values that win over everything else (used by the CLI and tests).
    """
    path = config_file or os.environ.get(CONFIG_ENV)
    try:
        file_values = read_config_file(Path(path)) if path else {}
    except ConfigFileError as exc:
        raise SettingsError(str(exc)) from None

    class _Configured(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (init_settings, env_settings, YamlSource(settings_cls, file_values))

    try:
        configured = _Configured(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: "
            f"{err['msg'].removeprefix('Value error, ')} "
            f"(got {err.get('input')!r})"
            for err in exc.errors()
        )
        raise SettingsError(f"Invalid settings: {problems}") from None
    return Settings.model_construct(**configured.model_dump())


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Return the process-wide settings, read once on first use."""
    return load_settings()
