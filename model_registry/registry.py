"""Register model bundles as versions of one MLflow model and move its aliases.

A *bundle* is a folder holding the four target models and everything needed to serve
them (feature pipeline, bins, decision rules, metrics, ``bundle.json``). Each bundle
becomes one version of the registered model ``settings.model_name``.

The training pipeline registers a *pyfunc model folder* (``MLmodel``, signature,
input example) that holds the bundle under ``artifacts/bundle`` (see
:mod:`panda_predictor.serving.pyfunc`), so MLflow's own tools load the version.
The version tag ``bundle_path`` records that place: the hooks and the service
download only the bundle folder and never go through pyfunc. A plain bundle folder
(no tag) is registered as it is. Test metrics are run metrics of the version's run,
not version tags.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from model_registry.checksum import DIGEST_TAG, folder_checksums, tree_digest
from model_registry.tracking import ensure_experiment, mlflow_client
from panda_predictor.errors import UserFixableError

if TYPE_CHECKING:
    from mlflow.entities.model_registry import ModelVersion

    from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)

CHAMPION = "champion"
CHALLENGER = "challenger"
#: The champion before the last promotion, kept for a one-command rollback.
PREVIOUS = "previous"
ALIASES = (CHAMPION, CHALLENGER, PREVIOUS)
#: Version tag naming the champion a version replaced (where a rollback goes).
PREVIOUS_CHAMPION_TAG = "champion.previous"

MANIFEST = "bundle.json"
BUNDLE_ARTIFACT_PATH = "bundle"
#: Legacy: versions registered before metrics became run metrics carry these tags.
METRIC_TAG_PREFIX = "metric."
#: Where the bundle lies inside the registered folder ("" or absent: at its root).
BUNDLE_PATH_TAG = "bundle_path"
MODEL_ARTIFACT_PATH = "model"
SCHEMA_HASH_TAG = "schema_hash"
BINS_VERSION_TAG = "bins_version"
REGISTER_EXPERIMENT = "panda-predictor-training"


class RegistryError(UserFixableError, RuntimeError):
    """The model registry refused a request or holds something unexpected.

    A :class:`~panda_predictor.errors.UserFixableError` (the command line shows it as
    one line), a ``RuntimeError`` like before, not a ``ValueError``.
    """


class NoChampionError(RegistryError):
    """No version of the model carries the ``champion`` alias (and no cached copy)."""


class StoreNotFoundError(NoChampionError):
    """The configured local MLflow store (SQLite file or folder) does not exist.

    A reader must not let MLflow create an empty store at a mistyped path and then
    report "no champion": the message names the path and the setting instead.
    """


class BundleError(ValueError):
    """A bundle folder is missing a part, or its parts or its manifest disagree.

    The one bundle error: the registry raises it on a manifest it cannot register,
    :mod:`panda_predictor.serving.bundle` on a folder it cannot save into or load.
    It lives here, in the registry layer below serving, so both may raise it and a
    caller catches one type. A ``ValueError``, not a user error: where a folder comes
    from the user (``--bundle``) the command wraps it in ``UserInputError``.
    """


def local_store_path(uri: str) -> Path | None:
    """Return the file (SQLite) or folder (file store) a local store URI names.

    ``None`` for a server (``http``, ``databricks``, ...) or an in-memory SQLite.
    """
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        # sqlite:///relative/path or sqlite:////absolute/path, as SQLAlchemy reads it.
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else ""
        path = path.split("?", 1)[0]
        return Path(path) if path and path != ":memory:" else None
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "":
        return Path(uri)
    return None


def require_existing_store(settings: Settings) -> None:
    """Raise :class:`StoreNotFoundError` if the configured local store is missing.

    Only readers call this (the hooks, the service, evaluation): training creates
    the store on its first run, as it should.
    """
    uri = settings.tracking_uri()
    path = local_store_path(uri)
    if path is None:
        return
    if urlparse(uri).scheme == "sqlite":
        exists, kind = path.is_file(), "SQLite file"
    else:
        exists, kind = path.is_dir(), "folder"
    if not exists:
        raise StoreNotFoundError(
            f"No champion model: the MLflow store {uri!r} must be an existing "
            f"{kind}. Got no such "
            f"{kind} {str(path)!r} instead. Fix the setting mlflow_tracking_uri "
            "(PANDA_PREDICTOR_MLFLOW_TRACKING_URI or MLFLOW_TRACKING_URI), or run "
            "'panda-predictor train' to create the store."
        )


def _reader_client(settings: Settings) -> Any:
    """Return a client for reading, after checking the local store exists."""
    require_existing_store(settings)
    return mlflow_client(settings)


def registry_errors() -> tuple[type[BaseException], ...]:
    """Return the exception types that mean "the registry is unreachable or broken".

    MLflow wraps HTTP failures in ``MlflowException``; a broken SQLite store raises
    SQLAlchemy errors; a vanished artifact folder raises ``OSError``.
    """
    import requests
    import sqlalchemy.exc
    from mlflow.exceptions import MlflowException

    return (
        MlflowException,
        sqlalchemy.exc.SQLAlchemyError,
        OSError,
        requests.RequestException,
    )


@dataclass(frozen=True)
class ModelVersionInfo:
    """What the project needs to know about one registered bundle version."""

    name: str
    version: int
    run_id: str | None
    source: str
    aliases: tuple[str, ...] = ()
    schema_hash: str | None = None
    bins_version: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    created: datetime | None = None
    description: str = ""

    @property
    def bundle_path(self) -> str:
        """Return where the bundle lies inside the registered folder ("" = root)."""
        return self.tags.get(BUNDLE_PATH_TAG, "").strip("/")

    @property
    def uri(self) -> str:
        """Return the ``models:/`` URI of exactly this version."""
        return f"models:/{self.name}/{self.version}"


def _to_info(mv: ModelVersion) -> ModelVersionInfo:
    tags = dict(mv.tags or {})
    metrics: dict[str, float] = {}
    for key, value in tags.items():
        if key.startswith(METRIC_TAG_PREFIX):
            try:
                metrics[key[len(METRIC_TAG_PREFIX) :]] = float(value)
            except ValueError:
                logger.warning("Ignoring non-numeric metric tag %s=%r", key, value)
    return ModelVersionInfo(
        name=mv.name,
        version=int(mv.version),
        run_id=mv.run_id,
        source=mv.source or "",
        aliases=tuple(mv.aliases or ()),
        schema_hash=tags.get(SCHEMA_HASH_TAG),
        bins_version=tags.get(BINS_VERSION_TAG),
        metrics=metrics,
        tags=tags,
        created=(
            datetime.fromtimestamp(mv.creation_timestamp / 1000, UTC)
            if mv.creation_timestamp
            else None
        ),
        description=mv.description or "",
    )


def read_manifest(bundle_dir: Path | str) -> dict[str, Any]:
    """Return the ``bundle.json`` manifest of a bundle folder, checked.

    The manifest must be a JSON object with non-empty string fields ``schema_hash``
    and ``bins_version``; everything else in it is the pipeline's business.
    """
    folder = Path(bundle_dir)
    if not folder.is_dir():
        raise BundleError(
            f"The bundle must be an existing folder. Got {str(folder)!r} instead."
        )
    path = folder / MANIFEST
    if not path.is_file():
        raise BundleError(
            f"The bundle folder must hold {MANIFEST}. Got no such file in "
            f"{str(folder)!r} instead."
        )
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise BundleError(
            f"The file {MANIFEST} must be valid JSON. Got an error instead: {exc}"
        ) from None
    if not isinstance(manifest, dict):
        raise BundleError(
            f"The file {MANIFEST} must hold a JSON object. Got "
            f"{type(manifest).__name__} instead."
        )
    for key in (SCHEMA_HASH_TAG, BINS_VERSION_TAG):
        value = manifest.get(key)
        if not isinstance(value, str) or not value:
            raise BundleError(
                f"The '{key}' field of {MANIFEST} must be a non-empty string. Got "
                f"{value!r} instead."
            )
    return manifest


def _checked_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    checked = {}
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(
                f"The metric {name!r} must be a number. Got {value!r} instead."
            )
        if not math.isfinite(value):
            raise ValueError(
                f"The metric {name!r} must be a finite number. Got {value!r} instead."
            )
        checked[name] = float(value)
    return checked


def _ensure_registered_model(client: Any, name: str) -> None:
    """Create the registered model ``name`` unless it exists (or appears meanwhile)."""
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
        return
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
    try:
        client.create_registered_model(
            name, description="panda-predictor bundles: four target models each."
        )
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise


def register_bundle(
    settings: Settings,
    bundle_dir: Path | str,
    run_id: str | None,
    metrics: Mapping[str, float],
    description: str | None = None,
    bundle_path: str = "",
) -> ModelVersionInfo:
    """Log a bundle folder into a run and register it as a new model version.

    The version gets no alias; call
    :func:`model_registry.promotion.promote_if_not_worse` (or :func:`set_alias`) to
    make it ``champion`` or ``challenger``.

    Parameters
    ----------
    settings:
        Settings naming the store and ``model_name``.
    bundle_dir:
        Folder to register: a bundle with a ``bundle.json`` manifest (see
        :func:`read_manifest`), or a pyfunc model folder holding one at
        ``bundle_path``.
    run_id:
        Training run to attach the bundle to; ``None`` opens a new run in the
        training experiment for it.
    metrics:
        Flat test metrics (``mean_accuracy``, ``ramcount.tail_recall``, ...), logged
        as metrics of the run (one batch; the training run may hold more).
    description:
        Free text shown in the MLflow UI.
    bundle_path:
        Where the bundle lies inside ``bundle_dir`` ("" = it is the bundle);
        recorded as the version tag ``bundle_path`` for the product's download.
    """
    from mlflow.entities import Metric

    folder = Path(bundle_dir)
    inner = folder / bundle_path if bundle_path else folder
    manifest = read_manifest(inner)
    checked = _checked_metrics(metrics)
    tags = {
        SCHEMA_HASH_TAG: manifest[SCHEMA_HASH_TAG],
        BINS_VERSION_TAG: manifest[BINS_VERSION_TAG],
        DIGEST_TAG: tree_digest(folder_checksums(inner)),
    }
    if bundle_path:
        tags[BUNDLE_PATH_TAG] = bundle_path.strip("/")
    client = mlflow_client(settings)
    created_run = run_id is None
    if run_id is None:
        experiment_id = ensure_experiment(settings, REGISTER_EXPERIMENT)
        run = client.create_run(experiment_id, run_name="register-bundle")
        run_id = run.info.run_id
    if checked:
        stamp = int(datetime.now(UTC).timestamp() * 1000)
        client.log_batch(
            run_id, metrics=[Metric(k, v, stamp, 0) for k, v in checked.items()]
        )
    if created_run:
        client.set_terminated(run_id)
    artifact_path = MODEL_ARTIFACT_PATH if bundle_path else BUNDLE_ARTIFACT_PATH
    client.log_artifacts(run_id, str(folder), artifact_path)
    artifact_uri = client.get_run(run_id).info.artifact_uri
    name = settings.model_name
    _ensure_registered_model(client, name)
    mv = client.create_model_version(
        name,
        source=f"{artifact_uri.rstrip('/')}/{artifact_path}",
        run_id=run_id,
        tags=tags,
        description=description,
    )
    logger.info(
        "Registered %s version %s from run %s (schema %s, bins %s)",
        name,
        mv.version,
        run_id,
        tags[SCHEMA_HASH_TAG],
        tags[BINS_VERSION_TAG],
    )
    return replace(_to_info(mv), metrics=checked)


def version_metrics(settings: Settings, info: ModelVersionInfo) -> dict[str, float]:
    """Return the test metrics of a version: its run's metrics (legacy: its tags)."""
    if info.run_id is None:
        return dict(info.metrics)
    run = _reader_client(settings).get_run(info.run_id)
    return {**info.metrics, **dict(run.data.metrics)}


def get_version(settings: Settings, version: int) -> ModelVersionInfo:
    """Return one version of the model."""
    return _to_info(
        _reader_client(settings).get_model_version(settings.model_name, str(version))
    )


def set_alias(settings: Settings, version: int, alias: str) -> None:
    """Point ``alias`` (champion, challenger or previous) at ``version``.

    A version made ``champion`` loses the ``challenger`` alias if it had it, so the
    two never name the same bundle.
    """
    if alias not in ALIASES:
        raise ValueError(
            f"The 'alias' argument must be one of {', '.join(ALIASES)}. Got "
            f"{alias!r} instead."
        )
    client = mlflow_client(settings)
    name = settings.model_name
    client.set_registered_model_alias(name, alias, str(version))
    if alias == CHAMPION:
        current = client.get_model_version(name, str(version))
        if CHALLENGER in (current.aliases or ()):
            client.delete_registered_model_alias(name, CHALLENGER)
    logger.info("Alias %s of %s now points at version %s", alias, name, version)


def version_by_alias(settings: Settings, alias: str) -> ModelVersionInfo | None:
    """Return the version carrying ``alias``, or ``None`` if there is none.

    Raises the registry's own errors when it cannot be reached.
    """
    from mlflow.exceptions import MlflowException

    client = _reader_client(settings)
    try:
        mv = client.get_model_version_by_alias(settings.model_name, alias)
    except MlflowException as exc:
        # A missing model or alias is an answer, not a failure of the registry.
        if exc.error_code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            return None
        raise
    return _to_info(mv)


def champion_version(settings: Settings) -> ModelVersionInfo | None:
    """Return the current champion version, or ``None`` if no model is champion."""
    return version_by_alias(settings, CHAMPION)


def download_version(settings: Settings, version: int, dest: Path | str) -> Path:
    """Download the bundle of one version to the folder ``dest``; return ``dest``.

    ``dest`` must not exist or be empty. The files arrive in a temporary sibling
    folder first and are renamed to ``dest`` when complete.
    """
    import mlflow.artifacts

    target = Path(dest)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(
            f"The download folder must not exist or be empty. Got {str(target)!r} "
            "instead."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    client = _reader_client(settings)
    # MLflow resolves a ``models:/`` URI with the process-wide registry URI whatever
    # we pass, so resolve the version's source with our own client instead.
    source = client.get_model_version_download_uri(settings.model_name, str(version))
    inner = _to_info(client.get_model_version(settings.model_name, str(version)))
    if inner.bundle_path:
        # Only the bundle: the pyfunc wrapper around it is for MLflow's tools.
        source = f"{source.rstrip('/')}/{inner.bundle_path}"
    staging = Path(tempfile.mkdtemp(prefix=".download-", dir=target.parent))
    try:
        got = mlflow.artifacts.download_artifacts(
            artifact_uri=source,
            dst_path=str(staging),
            tracking_uri=settings.tracking_uri(),
        )
        os.rename(got, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def download_champion(settings: Settings, dest: Path | str) -> Path:
    """Download the bundle that ``models:/<name>@champion`` names into ``dest``.

    The alias is resolved once and that exact version is downloaded, so a promotion
    during the download cannot mix two bundles.
    """
    info = champion_version(settings)
    if info is None:
        raise NoChampionError(
            f"No champion model: no version of {settings.model_name!r} has the "
            "'champion' alias. Run 'panda-predictor train' first."
        )
    return download_version(settings, info.version, dest)
