"""Keep a local copy of the champion bundle so predictions survive a registry outage.

Layout under ``settings.cache_dir()``::

    current.json          pointer: model name, version, folder, when fetched
    v7-3f2a9c1e/          one complete bundle per fetched version
    .tmp-*/               downloads in progress (never read)
    .lock                 serialises writers (readers never lock)

A new bundle is downloaded into a ``.tmp-*`` folder, renamed into place and only then
named by ``current.json``, which itself is replaced atomically (``os.replace``), so a
reader sees either the old complete bundle or the new complete bundle, never a half.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from model_registry.registry import (
    NoChampionError,
    champion_version,
    download_version,
    registry_errors,
)

if TYPE_CHECKING:
    from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)

POINTER = "current.json"
LOCK = ".lock"
TMP_PREFIX = ".tmp-"

#: ``source`` values of :class:`ChampionBundle`.
FROM_REGISTRY = "registry"
FROM_CACHE = "cache"


class ChampionBundle(NamedTuple):
    """Where the champion bundle is on disk, its version, and who vouched for it.

    ``source`` is ``"registry"`` when the registry confirmed this is the current
    champion, ``"cache"`` when the registry could not be asked and the cached copy
    (possibly stale) is used instead.
    """

    path: Path
    version: int
    source: str


@dataclass(frozen=True)
class CachedBundle:
    """The bundle the cache pointer names."""

    model_name: str
    version: int
    path: Path
    fetched_at: str


def read_cached(settings: Settings) -> CachedBundle | None:
    """Return the cached champion of ``settings.model_name``, or ``None`` if absent.

    A pointer for another model name, or naming a folder that is gone, counts as
    absent.
    """
    root = settings.cache_dir()
    pointer = root / POINTER
    try:
        data = json.loads(pointer.read_text())
        cached = CachedBundle(
            model_name=str(data["model_name"]),
            version=int(data["version"]),
            path=root / str(data["folder"]),
            fetched_at=str(data.get("fetched_at", "")),
        )
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        logger.warning("Ignoring unreadable model cache pointer %s: %s", pointer, exc)
        return None
    if cached.model_name != settings.model_name:
        logger.warning(
            "Ignoring model cache %s: it holds %r, the settings name %r",
            root,
            cached.model_name,
            settings.model_name,
        )
        return None
    if not cached.path.is_dir():
        logger.warning("Ignoring model cache %s: folder %s is gone", root, cached.path)
        return None
    return cached


@contextmanager
def _writer_lock(root: Path) -> Iterator[None]:
    """Hold an exclusive lock on the cache folder for one writer at a time."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_pointer(root: Path, data: dict[str, object]) -> None:
    """Replace ``current.json`` atomically (write a temp file, then rename)."""
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".json", dir=root)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, root / POINTER)


def _prune(root: Path, keep: set[str]) -> None:
    """Remove bundle folders and leftovers not in ``keep`` (caller holds the lock)."""
    for entry in root.iterdir():
        if entry.name in keep or entry.name in (POINTER, LOCK):
            continue
        if entry.name.startswith(TMP_PREFIX) or entry.name.startswith("v"):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def store_version(settings: Settings, version: int) -> Path:
    """Download ``version`` from the registry into the cache and make it current.

    Keeps the previously current folder (a reader may still be loading it) and
    removes older ones. Returns the new bundle folder.
    """
    root = settings.cache_dir()
    with _writer_lock(root):
        previous = read_cached(settings)
        tmp = root / f"{TMP_PREFIX}{uuid.uuid4().hex}"
        final = root / f"v{version}-{uuid.uuid4().hex[:8]}"
        try:
            download_version(settings, version, tmp)
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        _write_pointer(
            root,
            {
                "model_name": settings.model_name,
                "version": version,
                "folder": final.name,
                "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )
        keep = {final.name}
        if previous is not None:
            keep.add(previous.path.name)
        _prune(root, keep)
    logger.info("Cached %s version %s in %s", settings.model_name, version, final)
    return final


def load_champion_bundle_dir(settings: Settings) -> ChampionBundle:
    """Return the local folder of the champion bundle, its version and its source.

    Asks the registry which version is champion and refreshes the cache if it
    changed. If the registry is unreachable or broken, logs why and returns the
    cached copy. When the registry answers that there is no champion, or neither
    the registry nor the cache has one, raises :class:`NoChampionError`.
    """
    errors = registry_errors()
    try:
        info = champion_version(settings)
        if info is None:
            raise NoChampionError(
                f"No champion model: no version of {settings.model_name!r} has the "
                "'champion' alias. Run 'panda-predictor train' first."
            )
        cached = read_cached(settings)
        if cached is not None and cached.version == info.version:
            return ChampionBundle(cached.path, info.version, FROM_REGISTRY)
        path = store_version(settings, info.version)
        return ChampionBundle(path, info.version, FROM_REGISTRY)
    except NoChampionError:
        raise
    except errors as exc:
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        cached = read_cached(settings)
        if cached is None:
            raise NoChampionError(
                "No champion model: the model registry at "
                f"{settings.tracking_uri()!r} failed ({reason}) and the cache "
                f"{str(settings.cache_dir())!r} is empty. Run 'panda-predictor "
                "train' first, or fix the registry."
            ) from exc
        logger.warning(
            "Model registry %s unusable (%s); using cached %s version %s fetched %s",
            settings.tracking_uri(),
            reason,
            settings.model_name,
            cached.version,
            cached.fetched_at,
        )
        return ChampionBundle(cached.path, cached.version, FROM_CACHE)
