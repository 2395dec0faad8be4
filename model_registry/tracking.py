"""Point MLflow at the configured store and log training runs into it.

Everything MLflow-specific that the training pipeline needs for *tracking* lives here:
the store URIs, the experiment (created with an artifact location under
``settings.artifact_root()`` so a local store never writes ``./mlruns`` into the
working directory), a run context manager and small logging helpers that accept the
flat dictionaries the pipeline produces.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    import mlflow
    from mlflow import MlflowClient

    from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)

#: Experiment the training pipeline logs into unless told otherwise.
TRAINING_EXPERIMENT = "panda-predictor-training"

#: MLflow's own tag for the code version of a run.
GIT_COMMIT_TAG = "mlflow.source.git.commit"

#: Schemes whose artifacts we place ourselves (a server decides for itself).
_LOCAL_SCHEMES = {"", "file", "sqlite"}

#: MLflow refuses metric/param names with other characters than these.
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-/ ]")
_MAX_NAME_LENGTH = 250
_MAX_PARAM_LENGTH = 6000


def registry_http_environment(settings: Settings) -> dict[str, str]:
    """Return the MLflow HTTP variables that bound one registry call, from settings.

    MLflow's defaults (120 s timeout, 7 retries, back-off factor 2) let one call to a
    registry that is down take minutes, so every hook pass would stall before the
    cached champion is used. The product sets its own bounds instead: one call takes
    at most ``timeout * (retries + 1)`` plus the back-off. No jitter: the bound must
    hold on every call.
    """
    return {
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(settings.registry_timeout_seconds),
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(settings.registry_max_retries),
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": str(settings.registry_backoff_factor),
        "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
    }


def disable_mlflow_telemetry() -> None:
    """Turn MLflow's usage telemetry off, unless the environment already says.

    The one place that sets ``MLFLOW_DISABLE_TELEMETRY``. MLflow decides at the
    first ``import mlflow`` of a process whether to start its telemetry client, so
    this must run before that import: the entry points (the command line, the HTTP
    app) call it first thing, and so does every function here before it imports
    MLflow. Called, never run at import time, so importing a module of ours does not
    change the environment. ``setdefault``: an operator's explicit value wins.
    """
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def _prepare_mlflow_environment(settings: Settings) -> None:
    """Set the registry call bounds; turn off telemetry and progress bars.

    MLflow reads these variables on every request, so setting them before each
    client is built is enough (and a changed setting takes effect at once).
    """
    disable_mlflow_telemetry()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.update(registry_http_environment(settings))


def is_local_store(uri: str) -> bool:
    """Return whether ``uri`` is a store on this machine (SQLite file or folder)."""
    return urlparse(uri).scheme in _LOCAL_SCHEMES


def mlflow_client(settings: Settings) -> MlflowClient:
    """Return a client bound to the configured tracking and registry store.

    The client carries its own URIs, so code using it does not depend on MLflow's
    process-wide state (several stores can be used side by side, as tests do). A
    local store that was moved is re-anchored first (see
    :mod:`model_registry.relocation`).
    """
    _prepare_mlflow_environment(settings)
    from mlflow import MlflowClient

    from model_registry.relocation import reanchor_store

    reanchor_store(settings)

    uri = settings.tracking_uri()
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def ensure_experiment(settings: Settings, experiment: str = TRAINING_EXPERIMENT) -> str:
    """Return the id of ``experiment``, creating it with our artifact location if new.

    Parameters
    ----------
    settings:
        Settings naming the store and the artifact root.
    experiment:
        Experiment name.
    """
    client = mlflow_client(settings)
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        return str(found.experiment_id)
    location = None
    if is_local_store(settings.tracking_uri()):
        location = f"{settings.artifact_root()}/{experiment}"
    experiment_id = client.create_experiment(experiment, artifact_location=location)
    logger.info(
        "Created MLflow experiment %s (id %s) with artifacts at %s",
        experiment,
        experiment_id,
        location or "the server's default",
    )
    return str(experiment_id)


def configure_mlflow(settings: Settings, experiment: str = TRAINING_EXPERIMENT) -> str:
    """Point MLflow's process-wide state at the configured store and experiment.

    Turns telemetry off (:func:`disable_mlflow_telemetry`), sets the tracking and
    registry URI, and makes
    ``experiment`` the active one (created under ``settings.artifact_root()`` for a
    local store). Returns the experiment id.

    Parameters
    ----------
    settings:
        Settings naming the store.
    experiment:
        Experiment to activate.
    """
    _prepare_mlflow_environment(settings)
    import mlflow

    uri = settings.tracking_uri()
    if urlparse(uri).scheme == "sqlite":
        settings.home.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    experiment_id = ensure_experiment(settings, experiment)
    mlflow.set_experiment(experiment_id=experiment_id)
    return experiment_id


@contextmanager
def start_training_run(
    settings: Settings,
    experiment: str = TRAINING_EXPERIMENT,
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> Iterator[mlflow.ActiveRun]:
    """Open an MLflow run for one training; it ends FAILED if the block raises.

    Parameters
    ----------
    settings:
        Settings naming the store.
    experiment:
        Experiment to log into.
    run_name:
        Human-readable run name; MLflow invents one when omitted.
    tags:
        Extra run tags (string values). The code's git commit, when known, is
        added as ``mlflow.source.git.commit``.
    """
    experiment_id = configure_mlflow(settings, experiment)  # MLflow's env first
    import mlflow

    all_tags = {"panda_predictor.model_name": settings.model_name}
    commit = git_commit()
    if commit is not None:
        all_tags[GIT_COMMIT_TAG] = commit
    all_tags.update(tags or {})
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=run_name, tags=all_tags
    ) as run:
        logger.info(
            "Started MLflow run %s in experiment %s", run.info.run_id, experiment
        )
        yield run


def sanitize_name(name: str) -> str:
    """Return ``name`` changed just enough for MLflow to accept it as a key.

    Characters other than letters, digits, ``_ . - / space`` become ``_``; path
    pieces MLflow refuses (empty, ``.``, ``..``, a leading ``/``) are dropped.
    """
    cleaned = _BAD_NAME_CHARS.sub("_", str(name))
    parts = [p for p in cleaned.split("/") if p not in ("", ".", "..")]
    return ("/".join(parts) or "_")[:_MAX_NAME_LENGTH]


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Return nested mappings as one flat dict with dotted keys."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten(value, name))
        else:
            flat[name] = value
    return flat


def _sanitized_keys(values: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``values`` with sanitized keys; refuse two keys that become one."""
    result: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, value in flatten(values).items():
        clean = sanitize_name(key)
        if clean in origin:
            raise ValueError(
                f"The names {origin[clean]!r} and {key!r} both become {clean!r} in "
                "MLflow. Rename one of them."
            )
        origin[clean] = key
        result[clean] = value
    return result


def param_value(value: Any) -> str:
    """Return how one parameter value reads in MLflow (sequences comma-joined)."""
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return ",".join(param_value(v) for v in items)
    if value is None:
        return "none"
    return str(value)


def git_commit(folder: Path | str | None = None) -> str | None:
    """Return the git commit of ``folder`` (default: this code's), or ``None``.

    ``None`` when git is not installed, the code is not in a repository (an
    installed wheel), or git takes longer than two seconds.
    """
    import subprocess

    where = Path(folder) if folder is not None else Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) == 40 else None


def log_params(params: Mapping[str, Any]) -> dict[str, str]:
    """Log a (possibly nested) dict as run parameters; return what was logged.

    Values are turned into strings and cut to MLflow's length limit; a list or
    tuple becomes its items joined by commas (``xgboost,keras``), not its repr.
    """
    import mlflow

    logged = {
        k: param_value(v)[:_MAX_PARAM_LENGTH]
        for k, v in _sanitized_keys(params).items()
    }
    if logged:
        mlflow.log_params(logged)
    return logged


def log_metrics(
    metrics: Mapping[str, Any], step: int | None = None
) -> dict[str, float]:
    """Log a (possibly nested) dict of numbers as run metrics; return what was logged.

    Parameters
    ----------
    metrics:
        Metric names to numbers, e.g. ``{"ramcount.tail_recall": 0.97}``.
    step:
        Optional step (epoch) of all these values.
    """
    import mlflow

    logged: dict[str, float] = {}
    for key, value in _sanitized_keys(metrics).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(
                f"The metric {key!r} must be a number. Got {value!r} instead."
            )
        logged[key] = float(value)
    if logged:
        mlflow.log_metrics(logged, step=step)
    skipped = [k for k, v in logged.items() if not math.isfinite(v)]
    if skipped:
        logger.warning("Logged non-finite metric values for %s", ", ".join(skipped))
    return logged


def log_report_dir(report_dir: Path | str, artifact_path: str = "report") -> None:
    """Log every file of a report folder (plots, tables) under ``artifact_path``."""
    import mlflow

    folder = Path(report_dir)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"The report folder must exist. Got {str(folder)!r} instead."
        )
    mlflow.log_artifacts(str(folder), artifact_path)


def log_bins(bins_file: Path | str, artifact_path: str = "config") -> None:
    """Log the bins YAML the models were trained with."""
    import mlflow

    path = Path(bins_file)
    if not path.is_file():
        raise FileNotFoundError(f"The bins file must exist. Got {str(path)!r} instead.")
    mlflow.log_artifact(str(path), artifact_path)


def log_training_input(
    frame: Any, name: str, context: str = "training"
) -> tuple[str, str]:
    """Log ``frame`` (a pandas frame) as the run's dataset input; return name, digest.

    MLflow stores the dataset's name, digest (a hash of its content), schema and
    row count with the run, not the rows.
    """
    import warnings

    import mlflow
    from mlflow.data.pandas_dataset import from_pandas

    with warnings.catch_warnings():
        # MLflow warns that integer columns cannot hold missing values; ours are ids.
        warnings.simplefilter("ignore")
        dataset = from_pandas(frame, name=name)
        mlflow.log_input(dataset, context=context)
    return dataset.name, dataset.digest


def log_feature_schema(
    schema: Mapping[str, Any], artifact_file: str = "config/feature_schema.json"
) -> None:
    """Log the feature schema (names, types, hash) as a JSON artifact."""
    import mlflow

    mlflow.log_dict(dict(schema), artifact_file)
