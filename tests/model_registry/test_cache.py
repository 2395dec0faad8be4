"""The local champion cache: refresh, fallback when the registry fails, atomic swap."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from model_registry import cache
from model_registry.cache import load_champion_bundle_dir, read_cached, store_version
from model_registry.registry import NoChampionError, register_bundle, set_alias
from panda_predictor.settings import load_settings
from tests.bundle_parts import make_bundle

# MLflow 3.17's SQL store uses SQLAlchemy's ``noload`` strategy, deprecated in 2.1.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)

METRICS = {"mean_accuracy": 0.8, "ramcount.tail_recall": 0.95}


def markers_of(folder: Path) -> set[str]:
    """Return the markers found in a bundle folder (one if it is consistent)."""
    found = {json.loads((folder / "bundle.json").read_text())["marker"]}
    models = sorted((folder / "models").iterdir())
    assert len(models) == 4, f"incomplete bundle {folder}: {models}"
    found.update(json.loads(p.read_text())["m"] for p in models)
    return found


def publish(settings, folder: Path, marker: str) -> int:
    """Register a bundle and make it champion; return its version."""
    info = register_bundle(settings, make_bundle(folder, marker), None, METRICS)
    set_alias(settings, info.version, "champion")
    return info.version


def test_loads_from_registry_and_refreshes_when_champion_changes(
    reg_settings, tmp_path
):
    publish(reg_settings, tmp_path / "b1", "one")
    first = load_champion_bundle_dir(reg_settings)
    assert (first.version, first.source) == (1, "registry")
    assert markers_of(first.path) == {"one"}
    assert first.path.parent == reg_settings.cache_dir()

    again = load_champion_bundle_dir(reg_settings)
    assert again == first  # unchanged champion: no new download

    v2 = register_bundle(
        reg_settings, make_bundle(tmp_path / "b2", "two"), None, METRICS
    )
    set_alias(reg_settings, v2.version, "champion")
    second = load_champion_bundle_dir(reg_settings)
    assert (second.version, second.source) == (2, "registry")
    assert markers_of(second.path) == {"two"}
    assert read_cached(reg_settings).version == 2

    publish(reg_settings, tmp_path / "b3", "three")
    third = load_champion_bundle_dir(reg_settings)
    kept = {p.name for p in reg_settings.cache_dir().iterdir()}
    # The current and the previous bundle stay (a reader may hold it); older go.
    # .confirmed: when the registry last vouched for the copy (predict's fast path).
    assert kept == {
        "current.json",
        ".lock",
        ".confirmed",
        second.path.name,
        third.path.name,
    }


@pytest.mark.parametrize(
    "broken_uri",
    ["sqlite:///{tmp}/not-a-database.db", "http://127.0.0.1:9"],
    ids=["not-a-database", "refused-port"],
)
def test_falls_back_to_cache_when_registry_fails(
    reg_settings, tmp_path, monkeypatch, caplog, broken_uri
):
    (tmp_path / "not-a-database.db").write_text("this is not SQLite\n" * 10)
    publish(reg_settings, tmp_path / "b1", "one")
    cached = load_champion_bundle_dir(reg_settings)

    broken = load_settings(
        home=reg_settings.home,
        mlflow_tracking_uri=broken_uri.format(tmp=tmp_path),
        registry_max_retries=0,
        registry_timeout_seconds=1,
    )
    with caplog.at_level(logging.WARNING, logger="model_registry.cache"):
        got = load_champion_bundle_dir(broken)
    assert got == (cached.path, 1, "cache")
    assert markers_of(got.path) == {"one"}
    assert "unusable" in caplog.text
    assert "using cached panda-predictor version 1" in caplog.text


def test_no_champion_anywhere_is_a_clear_error(reg_settings, tmp_path):
    with pytest.raises(NoChampionError, match="Run 'panda-predictor train' first"):
        load_champion_bundle_dir(reg_settings)
    (tmp_path / "junk.db").write_text("junk\n" * 10)
    broken = load_settings(
        home=reg_settings.home, mlflow_tracking_uri=f"sqlite:///{tmp_path}/junk.db"
    )
    with pytest.raises(
        NoChampionError, match="failed .*DatabaseError.* cache .* holds no intact copy"
    ):
        load_champion_bundle_dir(broken)


def test_cache_of_another_model_name_is_not_used(reg_settings, tmp_path):
    publish(reg_settings, tmp_path / "b1", "one")
    load_champion_bundle_dir(reg_settings)
    other = load_settings(
        home=reg_settings.home,
        mlflow_tracking_uri=reg_settings.tracking_uri(),
        model_name="another-model",
    )
    assert read_cached(reg_settings) is not None
    assert read_cached(other) is None


def test_failed_download_leaves_the_old_bundle_current(
    reg_settings, tmp_path, monkeypatch
):
    publish(reg_settings, tmp_path / "b1", "one")
    before = load_champion_bundle_dir(reg_settings)
    publish(reg_settings, tmp_path / "b2", "two")

    def half_download(settings, version, dest):
        (Path(dest) / "models").mkdir(parents=True)
        (Path(dest) / "bundle.json").write_text('{"marker": "two"}')
        raise OSError("disk full")

    monkeypatch.setattr(cache, "download_version", half_download)
    got = load_champion_bundle_dir(reg_settings)
    assert got == (before.path, 1, "cache")
    leftovers = [p.name for p in reg_settings.cache_dir().iterdir()]
    assert sorted(leftovers) == sorted(
        [".lock", ".confirmed", "current.json", before.path.name]
    )


def test_reader_never_sees_half_a_bundle(reg_settings, tmp_path):
    v1 = publish(reg_settings, tmp_path / "b1", "one")
    store_version(reg_settings, v1)
    v2 = publish(reg_settings, tmp_path / "b2", "two")
    seen: list[set[str]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set() and len(seen) < 10_000:
            try:
                current = read_cached(reg_settings)
                assert current is not None, "no current bundle"
                seen.append(markers_of(current.path))
            except (AssertionError, OSError, ValueError) as exc:
                errors.append(exc)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for version in (v2, v1, v2):
            store_version(reg_settings, version)
    finally:
        done.set()
        thread.join(timeout=10)
    assert errors == []
    assert seen, "the reader never ran"
    assert all(markers in ({"one"}, {"two"}) for markers in seen)
    assert markers_of(read_cached(reg_settings).path) == {"two"}
