"""Registry faults: bounded calls, a missing store, damaged copies (issue 11, 8-10).

Real MLflow stores in temporary folders; a "down" registry is a real loopback socket
(a closed port, or a server that accepts and never answers).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from model_registry import cache
from model_registry.cache import load_champion_bundle_dir, read_cached
from model_registry.checksum import DIGEST_TAG, folder_checksums, tree_digest
from model_registry.registry import (
    NoChampionError,
    StoreNotFoundError,
    champion_version,
    get_version,
    register_bundle,
    set_alias,
)
from model_registry.tracking import mlflow_client, registry_http_environment
from panda_predictor.settings import load_settings
from tests.bundle_parts import make_bundle
from tests.test_db_support import database_with_one_eligible_task

pytestmark = pytest.mark.filterwarnings(
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)

METRICS = {"mean_accuracy": 0.8}
HTTP_VARIABLES = (
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER",
)


@pytest.fixture(autouse=True)
def restore_mlflow_http_environment(monkeypatch):
    """Let each test's registry settings reach the environment, restored after."""
    for name in HTTP_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def publish(settings, folder: Path, marker: str) -> int:
    """Register a bundle and make it champion; return its version."""
    info = register_bundle(settings, make_bundle(folder, marker), None, METRICS)
    set_alias(settings, info.version, "champion")
    return info.version


def faults(reason: str) -> float:
    """Return the registry fault counter for ``reason`` (0 before the first)."""
    value = REGISTRY.get_sample_value(
        "panda_predictor_registry_faults_total", {"reason": reason}
    )
    return value or 0.0


def marker_of(folder: Path) -> str:
    return json.loads((folder / "bundle.json").read_text())["marker"]


# -- 8. registry calls bounded by the product's settings -----------------------------


def test_default_bounds_are_the_products_not_mlflows():
    settings = load_settings(home=Path("unused"))
    assert registry_http_environment(settings) == {
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "2",
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",
        "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
    }


def test_configured_bounds_are_what_mlflow_reads(tmp_path, monkeypatch):
    from mlflow import environment_variables as mlflow_env

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")  # an operator's leftover
    monkeypatch.setenv("PANDA_PREDICTOR_REGISTRY_TIMEOUT_SECONDS", "3")
    settings = load_settings(
        home=tmp_path,
        mlflow_tracking_uri="http://127.0.0.1:9",
        registry_max_retries=2,
        registry_backoff_factor=1,
    )
    mlflow_client(settings)
    assert mlflow_env.MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 3
    assert mlflow_env.MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 2
    assert mlflow_env.MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR.get() == 1
    assert mlflow_env.MLFLOW_HTTP_REQUEST_BACKOFF_JITTER.get() == 0.0


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("registry_timeout_seconds", 0, "registry_timeout_seconds"),
        ("registry_max_retries", -1, "registry_max_retries"),
        ("registry_backoff_factor", "soon", "registry_backoff_factor"),
    ],
    ids=["zero-timeout", "negative-retries", "text-backoff"],
)
def test_bad_bounds_are_refused_naming_the_setting(tmp_path, key, value, match):
    from panda_predictor.settings import SettingsError

    with pytest.raises(SettingsError, match=match):
        load_settings(home=tmp_path, **{key: value})


class SilentServer:
    """A loopback TCP server that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        for conn in self.accepted:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent_server():
    server = SilentServer()
    yield server
    server.close()


def test_silent_registry_serves_the_cached_champion(
    reg_settings, tmp_path, silent_server, caplog
):
    publish(reg_settings, tmp_path / "b1", "one")
    cached = load_champion_bundle_dir(reg_settings)
    down = load_settings(
        home=reg_settings.home,
        mlflow_tracking_uri=f"http://127.0.0.1:{silent_server.port}",
        registry_timeout_seconds=1,
        registry_max_retries=1,
    )
    before = faults("registry_down")
    with caplog.at_level(logging.WARNING, logger="model_registry.cache"):
        got = load_champion_bundle_dir(down)
    assert got == (cached.path, 1, "cache")
    assert faults("registry_down") == before + 1
    assert "ReadTimeout" in caplog.text or "timed out" in caplog.text
    # One attempt and one retry reached the server: MLflow's 7 retries did not run.
    assert len(silent_server.accepted) == 2


# -- 9. a store that does not exist -------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    ["sqlite:///{tmp}/mlflwo.db", "sqlite:///{tmp}/no-such-folder/mlflow.db"],
    ids=["mistyped-file", "missing-folder"],
)
def test_missing_store_is_named_not_created(reg_settings, tmp_path, uri):
    publish(reg_settings, tmp_path / "b1", "one")
    load_champion_bundle_dir(reg_settings)  # a warm cache must not hide the typo
    wrong = uri.format(tmp=tmp_path)
    typo = load_settings(home=reg_settings.home, mlflow_tracking_uri=wrong)
    store = Path(wrong[len("sqlite:///") :])
    for read in (champion_version, load_champion_bundle_dir):
        with pytest.raises(StoreNotFoundError, match="mlflow_tracking_uri") as info:
            read(typo)
        assert f"no such SQLite file {str(store)!r}" in str(info.value)
    assert not store.exists()
    assert isinstance(info.value, NoChampionError)  # hooks fail open on it


def test_existing_store_without_champion_still_says_no_champion(reg_settings):
    with pytest.raises(NoChampionError, match="has the 'champion' alias"):
        load_champion_bundle_dir(reg_settings)


# -- 10. checksummed cache entries --------------------------------------------------


def _change(folder: Path) -> None:
    (folder / "models" / "ramcount.json").write_text('{"m": "garbage"}')


def _truncate(folder: Path) -> None:
    (folder / "models" / "walltime.json").write_bytes(b"")


def _delete(folder: Path) -> None:
    (folder / "models" / "ramcount.json").unlink()


def _add(folder: Path) -> None:
    (folder / "models" / "stray.json").write_text("{}")


DAMAGES = [
    (_change, "ramcount.json (changed)"),
    (_truncate, "walltime.json (changed)"),
    (_delete, "ramcount.json (missing)"),
    (_add, "stray.json (unexpected)"),
]
DAMAGE_IDS = ["changed", "truncated", "deleted", "extra-file"]


@pytest.mark.parametrize(("damage", "named"), DAMAGES, ids=DAMAGE_IDS)
def test_damaged_cache_is_replaced_from_the_registry(
    reg_settings, tmp_path, caplog, damage, named
):
    publish(reg_settings, tmp_path / "b1", "one")
    first = load_champion_bundle_dir(reg_settings)
    damage(first.path)
    before = faults("cache_corrupt")
    with caplog.at_level(logging.ERROR, logger="model_registry.cache"):
        again = load_champion_bundle_dir(reg_settings)
    assert (again.version, again.source) == (1, "registry")
    assert again.path != first.path
    assert marker_of(again.path) == "one"
    assert not read_cached(reg_settings).damage()
    assert not first.path.exists()  # the damaged copy is not kept for readers
    assert faults("cache_corrupt") == before + 1
    assert named in caplog.text


@pytest.mark.parametrize(("damage", "named"), DAMAGES[:2], ids=DAMAGE_IDS[:2])
def test_damaged_cache_is_refused_when_the_registry_is_down(
    reg_settings, tmp_path, damage, named
):
    publish(reg_settings, tmp_path / "b1", "one")
    damage(load_champion_bundle_dir(reg_settings).path)
    down = load_settings(
        home=reg_settings.home,
        mlflow_tracking_uri="http://127.0.0.1:9",
        registry_max_retries=0,
    )
    with pytest.raises(NoChampionError, match="holds no intact copy"):
        load_champion_bundle_dir(down)


def test_cache_without_checksums_is_replaced(reg_settings, tmp_path):
    publish(reg_settings, tmp_path / "b1", "one")
    first = load_champion_bundle_dir(reg_settings)
    pointer = reg_settings.cache_dir() / cache.POINTER
    data = json.loads(pointer.read_text())
    del data["files"]  # as written before checksums existed
    pointer.write_text(json.dumps(data))
    again = load_champion_bundle_dir(reg_settings)
    assert again.path != first.path
    assert read_cached(reg_settings).checksums == folder_checksums(again.path)


def test_registration_records_the_bundle_digest(reg_settings, tmp_path):
    folder = make_bundle(tmp_path / "b1", "one")
    info = register_bundle(reg_settings, folder, None, METRICS)
    assert get_version(reg_settings, info.version).tags[DIGEST_TAG] == tree_digest(
        folder_checksums(folder)
    )


def test_damaged_registry_copy_is_not_cached(reg_settings, tmp_path):
    publish(reg_settings, tmp_path / "b1", "one")
    cached = load_champion_bundle_dir(reg_settings)
    publish(reg_settings, tmp_path / "b2", "two")
    artifacts = reg_settings.home / "mlartifacts"
    copies = [p for p in artifacts.rglob("bundle.json") if marker_of(p.parent) == "two"]
    assert len(copies) == 1
    copies[0].write_text(copies[0].read_text().replace("two", "owt"))
    got = load_champion_bundle_dir(reg_settings)
    # Version 2's copy is damaged: the intact cached version 1 keeps serving.
    assert got == (cached.path, 1, "cache")
    assert sorted(os.listdir(reg_settings.cache_dir())) == sorted(
        [".lock", ".confirmed", "current.json", cached.path.name]
    )


def test_hook_command_names_the_missing_store_and_fails_open(tmp_path):
    from click.testing import CliRunner

    from panda_predictor.cli import main

    store = tmp_path / "mlflwo.db"
    env = {
        "PANDA_PREDICTOR_HOME": str(tmp_path),
        "MLFLOW_TRACKING_URI": f"sqlite:///{store}",
    }
    database_with_one_eligible_task(tmp_path)
    result = CliRunner().invoke(main, ["hook", "--once"], env=env)
    assert result.exit_code == 3, result.output  # failed open: no task touched
    assert f"no such SQLite file {str(store)!r}" in result.output
    assert "mlflow_tracking_uri" in result.output
    assert "Traceback" not in result.output
    assert not store.exists()
