"""Keras and TensorFlow are imported quietly unless the log level is DEBUG."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from panda_predictor.models.backend import prepare_environment, tensorflow_verbose


@pytest.fixture
def root_level():
    root = logging.getLogger()
    before = root.level
    yield root
    root.setLevel(before)


def test_only_debug_lets_tensorflow_speak(root_level):
    root_level.setLevel(logging.INFO)
    assert not tensorflow_verbose()
    root_level.setLevel(logging.DEBUG)
    assert tensorflow_verbose()


def test_quiet_keeps_an_explicit_level_and_verbose_lowers_it(monkeypatch):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    prepare_environment(verbose=False)
    assert os.environ["KERAS_BACKEND"] == "tensorflow"
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "1")
    prepare_environment(verbose=False)
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "1"
    prepare_environment(verbose=True)
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


@pytest.mark.slow
def test_importing_keras_prints_nothing_on_stderr():
    code = (
        "from panda_predictor.models.backend import import_keras\n"
        "keras, tf = import_keras()\n"
        "again = import_keras()\n"
        "assert again[0] is keras and again[1] is tf\n"
        "print(keras.backend.backend())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert done.stdout.strip() == "tensorflow"
    assert done.stderr == ""
