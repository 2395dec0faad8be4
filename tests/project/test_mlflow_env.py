"""MLflow's environment is set in one place, by a call, never by importing a module.

MLflow starts its telemetry client at the first ``import mlflow``, so
``MLFLOW_DISABLE_TELEMETRY`` must be set before that; the entry points and our MLflow
helpers call :func:`model_registry.tracking.disable_mlflow_telemetry` to do it.
These run in a fresh interpreter without the variable (conftest sets it here).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Modules whose import must neither import MLflow nor touch the environment.
MODULES = (
    "panda_predictor.cli",
    "panda_predictor.http_api.app",
    "model_registry",
    "pipelines.retraining.train_and_register",
    "pipelines.monitoring.drift",
    "pipelines.evaluation.replay_simulated",
    "pipelines.retraining.cadence",
    "pipelines.evaluation.trace.benchmark",
)


def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "MLFLOW_DISABLE_TELEMETRY"}
    clean["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_importing_our_modules_sets_nothing_and_imports_no_mlflow():
    code = (
        "import importlib, os, sys\n"
        f"for name in {MODULES!r}: importlib.import_module(name)\n"
        "print('mlflow' in sys.modules, os.environ.get('MLFLOW_DISABLE_TELEMETRY'))\n"
    )
    assert _run(code) == "False None"


def test_the_function_sets_it_and_an_explicit_value_wins():
    code = (
        "import os\n"
        "from model_registry.tracking import disable_mlflow_telemetry\n"
        "disable_mlflow_telemetry()\n"
        "print(os.environ['MLFLOW_DISABLE_TELEMETRY'])\n"
    )
    assert _run(code) == "true"
    assert _run(code, MLFLOW_DISABLE_TELEMETRY="false") == "false"


def test_the_command_line_sets_it_before_any_sub_command(tmp_path):
    code = (
        "import os, sys\n"
        "from click.testing import CliRunner\n"
        "from panda_predictor.cli import main\n"
        "r = CliRunner().invoke(main, ['db', '--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('mlflow' in sys.modules, os.environ.get('MLFLOW_DISABLE_TELEMETRY'))\n"
    )
    assert _run(code, PANDA_PREDICTOR_HOME=str(tmp_path)) == "False true"
