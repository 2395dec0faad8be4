"""Import Keras and TensorFlow quietly: the one place every import path goes through.

TensorFlow's C++ runtime (absl) prints "All log messages before absl::InitializeLog()"
and oneDNN notices straight to file descriptor 2 while its shared libraries load,
whatever ``TF_CPP_MIN_LOG_LEVEL`` says, so every command that loads a Keras model
used to start with lines an operator cannot act on. Unless the root logger is at
DEBUG, :func:`import_keras` sets the environment before the first import and
points descriptor 2 at ``/dev/null`` for the duration of that import only; Python
errors raised by the import still propagate normally.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

_lock = threading.Lock()


def tensorflow_verbose() -> bool:
    """Return whether TensorFlow may speak: only when the root logger is at DEBUG."""
    return logging.getLogger().getEffectiveLevel() <= logging.DEBUG


def prepare_environment(verbose: bool | None = None) -> None:
    """Set the Keras backend and TensorFlow's C++ log level before TF is imported.

    An explicit ``TF_CPP_MIN_LOG_LEVEL`` in the environment is kept, except that
    DEBUG logging lowers it to 0 so every TensorFlow line shows.
    """
    verbose = tensorflow_verbose() if verbose is None else verbose
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    else:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@contextmanager
def _silenced_stderr(silence: bool) -> Iterator[None]:
    """Point descriptor 2 at /dev/null while the body runs (no-op if not silencing)."""
    if not silence:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def import_keras() -> tuple[ModuleType, ModuleType]:
    """Return the ``keras`` and ``tensorflow`` modules, imported without noise."""
    with _lock:
        if "tensorflow" in sys.modules and "keras" in sys.modules:
            return sys.modules["keras"], sys.modules["tensorflow"]
        verbose = tensorflow_verbose()
        prepare_environment(verbose)
        with _silenced_stderr(not verbose):
            import keras
            import tensorflow as tf
        if not verbose:
            _quiet_absl()
        return keras, tf


def _quiet_absl() -> None:
    """Keep absl's Python logger (used by TensorFlow) at ERROR."""
    try:
        from absl import logging as absl_logging
    except ImportError:  # absl ships with TensorFlow; nothing to quiet without it
        return
    absl_logging.set_verbosity(absl_logging.ERROR)


__all__ = ["import_keras", "prepare_environment", "tensorflow_verbose"]
