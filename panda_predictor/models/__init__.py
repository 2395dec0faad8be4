"""The two binned resource classifier kinds: XGBoost trees and a Keras network.

This package is an adapter (it imports XGBoost and TensorFlow and reads and writes
model files), not part of the pure core. The classes are imported lazily, so code
that serves XGBoost models never pays TensorFlow's import time. Not here: features,
bins and decisions (core/), the bundle that serves a model (serving/).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import NotFittedError, ResourceClassifier, read_meta

if TYPE_CHECKING:
    from .keras_net import KerasResourceClassifier
    from .xgb import XGBoostResourceClassifier

__all__ = [
    "KerasResourceClassifier",
    "NotFittedError",
    "ResourceClassifier",
    "XGBoostResourceClassifier",
    "load_classifier",
    "model_class",
    "MODEL_KINDS",
]

#: Model kind (as written in ``meta.json``) -> "module:ClassName".
MODEL_KINDS = {
    "xgboost": "panda_predictor.models.xgb:XGBoostResourceClassifier",
    "keras": "panda_predictor.models.keras_net:KerasResourceClassifier",
}
_LAZY = {v.split(":")[1]: v for v in MODEL_KINDS.values()}


def _resolve(spec: str) -> type[ResourceClassifier]:
    module, name = spec.split(":")
    cls: type[ResourceClassifier] = getattr(importlib.import_module(module), name)
    return cls


def model_class(kind: str) -> type[ResourceClassifier]:
    """Return the classifier class of ``kind`` ("xgboost" or "keras")."""
    if kind not in MODEL_KINDS:
        raise ValueError(
            f"The model kind must be one of {sorted(MODEL_KINDS)}. "
            f"Got {kind!r} instead."
        )
    return _resolve(MODEL_KINDS[kind])


#: How a saved Keras network can be served: its numpy forward pass, or Keras itself.
RUNTIMES = ("numpy", "tensorflow")


def load_classifier(
    directory: str | Path, runtime: str = "numpy"
) -> ResourceClassifier:
    """Load a model saved by either kind's ``save``, dispatching on ``meta.json``.

    A Keras network saved with its exported weights is served by numpy (no
    TensorFlow import, see :mod:`.keras_numpy`) unless ``runtime`` is
    ``"tensorflow"``; an older folder without them loads with Keras.
    """
    if runtime not in RUNTIMES:
        raise ValueError(
            f"The 'runtime' field must be one of {list(RUNTIMES)}. Got {runtime!r} "
            "instead."
        )
    meta = read_meta(Path(directory))
    kind = str(meta.get("kind"))
    if kind == "keras" and runtime == "numpy":
        from .keras_numpy import NumpyKerasClassifier, has_forward

        if has_forward(directory):
            return NumpyKerasClassifier.load(directory)
    return model_class(kind).load(directory)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return _resolve(_LAZY[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
