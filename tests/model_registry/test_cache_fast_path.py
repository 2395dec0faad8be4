"""``predict`` serves a recently confirmed cached champion without importing MLflow."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from model_registry.cache import CONFIRMED, FROM_CACHE, POINTER, recently_confirmed
from model_registry.checksum import folder_checksums
from panda_predictor.settings import load_settings


@pytest.fixture
def cached_home(tmp_path, trained_bundle_dir):
    """Return settings whose model cache holds the test bundle as version 5."""
    settings = load_settings(home=tmp_path)
    root = settings.cache_dir()
    root.mkdir(parents=True)
    folder = root / "v5-abcdef12"
    shutil.copytree(trained_bundle_dir, folder)
    pointer = {
        "model_name": settings.model_name,
        "version": 5,
        "folder": folder.name,
        "fetched_at": "2026-12-01T00:00:00+00:00",
        "files": folder_checksums(folder),
    }
    (root / POINTER).write_text(json.dumps(pointer))
    (root / CONFIRMED).touch()
    return settings


def test_a_fresh_confirmation_serves_the_cache(cached_home):
    found = recently_confirmed(cached_home, 60)
    assert found is not None
    assert (found.version, found.source) == (5, FROM_CACHE)


def test_zero_age_always_asks_the_registry(cached_home):
    assert recently_confirmed(cached_home, 0) is None


def test_an_old_confirmation_asks_the_registry(cached_home):
    marker = cached_home.cache_dir() / CONFIRMED
    old = time.time() - 120
    os.utime(marker, (old, old))
    assert recently_confirmed(cached_home, 60) is None
    assert recently_confirmed(cached_home, 600) is not None


def test_a_damaged_copy_is_not_served(cached_home):
    cached = recently_confirmed(cached_home, 60)
    assert cached is not None
    (cached.path / "bundle.json").write_text("{}")
    assert recently_confirmed(cached_home, 60) is None


def test_predict_with_a_fresh_cache_imports_neither_mlflow_nor_tensorflow(
    cached_home, tmp_path
):
    task = tmp_path / "task.json"
    task.write_text(
        json.dumps(
            {
                "processingType": "simul",
                "prodSourceLabel": "managed",
                "transPath": "Sim_tf.py",
                "transHome": "AtlasOffline-23.0.5",
                "coreCount": 8,
            }
        )
    )
    code = (
        "import sys\n"
        "from panda_predictor.cli import main\n"
        "try:\n"
        f"    main(['predict', {str(task)!r}, '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "heavy = ('mlflow', 'tensorflow', 'keras', 'flask', 'scipy.signal',"
        " 'sklearn')\n"
        "print('IMPORTED', sorted(m for m in heavy if m in sys.modules))\n"
    )
    env = {**os.environ, "PANDA_PREDICTOR_HOME": str(cached_home.home)}
    env["MLFLOW_TRACKING_URI"] = "http://127.0.0.1:9/unreachable"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout.split("IMPORTED")[0])
    assert answer["predictions"][0]["model"]["version"] == "5"
    assert "IMPORTED []" in out.stdout


def test_xgboost_is_imported_without_hiding_scikit_learn_from_others():
    code = (
        "import sys\n"
        "from panda_predictor.models.xgb import xgb\n"
        "assert 'sklearn' not in sys.modules, 'xgboost imported scikit-learn'\n"
        "import sklearn\n"
        "booster = xgb.train({'objective': 'multi:softprob', 'num_class': 2},\n"
        "    xgb.DMatrix([[0.0], [1.0]], label=[0, 1]), num_boost_round=2)\n"
        "print(booster.predict(xgb.DMatrix([[1.0]])).shape, sklearn.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["(1,", "2)", "sklearn"]
