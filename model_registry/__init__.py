"""Adapter to the MLflow model registry: tracking, bundle versions, gate and cache.

One registered model (``settings.model_name``) whose versions are *bundles* (a folder
with the four target models and all that serves them). The training pipeline writes
through :mod:`~model_registry.tracking`, :mod:`~model_registry.registry` and
:mod:`~model_registry.promotion`; the hooks and the service read only the ``champion``
alias, through :func:`~model_registry.cache.load_champion_bundle_dir`. MLflow itself
is imported lazily, on first use. Not here: what a bundle holds and how it predicts
(panda_predictor/serving/), the evidence the gate judges (pipelines/).
"""

from model_registry.cache import ChampionBundle, load_champion_bundle_dir
from model_registry.gate import (
    GateEvidence,
    GateThresholds,
    MetricVerdict,
)
from model_registry.promotion import (
    GateDecision,
    promote_if_not_worse,
)
from model_registry.registry import (
    BundleError,
    ModelVersionInfo,
    NoChampionError,
    RegistryError,
    StoreNotFoundError,
    champion_version,
    download_champion,
    register_bundle,
    set_alias,
)
from model_registry.tracking import configure_mlflow, start_training_run

__all__ = [
    "BundleError",
    "ChampionBundle",
    "GateDecision",
    "GateEvidence",
    "GateThresholds",
    "MetricVerdict",
    "ModelVersionInfo",
    "NoChampionError",
    "RegistryError",
    "StoreNotFoundError",
    "champion_version",
    "configure_mlflow",
    "download_champion",
    "load_champion_bundle_dir",
    "promote_if_not_worse",
    "register_bundle",
    "set_alias",
    "start_training_run",
]
