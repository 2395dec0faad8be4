"""Keep a local copy of the champion bundle so predictions survive a registry outage.

Layout under ``settings.cache_dir()``::

    current.json          pointer: model name, version, folder, when fetched
    v7-3f2a9c1e/          one complete bundle per fetched version
    .tmp-*/               downloads in progress (never read)
    .lock                 serialises writers (readers never lock)

A new bundle is downloaded into a ``.tmp-*`` folder, renamed into place and only then
named by ``current.json``, which itself is replaced atomically (``os.replace``), so a
reader sees either the old complete bundle or the new complete bundle, never a half.

``current.json`` also holds the SHA-256 of every file of the bundle (checked against
the digest the registry recorded at registration, when it has one). Each use checks
the folder against it: a damaged copy is replaced from the registry, or, when the
registry is down, refused (the hooks then fail open) rather than served.
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

from prometheus_client import Counter

from model_registry.checksum import (
    DIGEST_TAG,
    differences,
    folder_checksums,
    tree_digest,
)
from model_registry.registry import (
    NoChampionError,
    RegistryError,
    champion_version,
    download_version,
    get_version,
    registry_errors,
)

if TYPE_CHECKING:
    from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)

POINTER = "current.json"
LOCK = ".lock"
TMP_PREFIX = ".tmp-"
#: Touched whenever the registry confirms the cached copy is the champion; its
#: age lets ``predict`` skip the registry (and MLflow's import) while it is fresh.
CONFIRMED = ".confirmed"

#: ``source`` values of :class:`ChampionBundle`.
FROM_REGISTRY = "registry"
FROM_CACHE = "cache"

#: Why the registry's answer was not (wholly) used; the ``reason`` label values.
REGISTRY_DOWN = "registry_down"
CACHE_CORRUPT = "cache_corrupt"

FAULTS = Counter(
    "panda_predictor_registry_faults_total",
    "Registry or model-cache faults met while loading the champion, by reason: "
    "registry_down (cached copy used or none), cache_corrupt (copy replaced or "
    "refused).",
    ["reason"],
)


class ChampionBundle(NamedTuple):
    """Where the champion bundle is on disk, its version, and who vouched for it.

    ``source`` is ``"registry"`` when the registry confirmed this is the current
    champion, ``"cache"`` when the registry could not be asked and the cached copy
    (possibly stale) is used instead.
    """

    path: Path
    version: int
    source: str


class CorruptDownloadError(RegistryError):
    """A downloaded bundle does not match the digest the registry recorded."""


@dataclass(frozen=True)
class CachedBundle:
    """The bundle the cache pointer names, with the checksums it was stored with.

    ``checksums`` is ``None`` for a pointer written before checksums existed: such a
    copy is replaced as soon as the registry answers.
    """

    model_name: str
    version: int
    path: Path
    fetched_at: str
    checksums: dict[str, str] | None = None

    def damage(self) -> list[str]:
        """Return the files that differ from the stored checksums (empty: intact)."""
        if self.checksums is None:
            return []
        return differences(self.checksums, folder_checksums(self.path))


def read_cached(settings: Settings) -> CachedBundle | None:
    """Return the cached champion of ``settings.model_name``, or ``None`` if absent.

    A pointer for another model name, or naming a folder that is gone, counts as
    absent.
    """
    root = settings.cache_dir()
    pointer = root / POINTER
    try:
        data = json.loads(pointer.read_text())
        raw_sums = data.get("files")
        cached = CachedBundle(
            model_name=str(data["model_name"]),
            version=int(data["version"]),
            path=root / str(data["folder"]),
            fetched_at=str(data.get("fetched_at", "")),
            checksums=None
            if raw_sums is None
            else {str(k): str(v) for k, v in dict(raw_sums).items()},
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
        if entry.name in keep or entry.name in (POINTER, LOCK, CONFIRMED):
            continue
        if entry.name.startswith(TMP_PREFIX) or entry.name.startswith("v"):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def _checked_download(settings: Settings, version: int, dest: Path) -> dict[str, str]:
    """Download ``version`` into ``dest``; return its checksums, checked if possible.

    A version registered with a digest tag must arrive with exactly that digest;
    older versions have none and are taken as they come.
    """
    expected = get_version(settings, version).tags.get(DIGEST_TAG)
    download_version(settings, version, dest)
    checksums = folder_checksums(dest)
    found = tree_digest(checksums)
    if expected is not None and found != expected:
        raise CorruptDownloadError(
            f"The download of {settings.model_name!r} version {version} must have "
            f"the registered SHA-256 {expected}. Got {found} instead: the registry's "
            "copy is damaged or changed since registration."
        )
    return checksums


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
            checksums = _checked_download(settings, version, tmp)
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
                "files": checksums,
            },
        )
        keep = {final.name}
        # A damaged previous copy is not worth keeping for readers that hold it.
        if previous is not None and not previous.damage():
            keep.add(previous.path.name)
        _prune(root, keep)
    logger.info("Cached %s version %s in %s", settings.model_name, version, final)
    return final


def _intact(cached: CachedBundle | None, settings: Settings) -> CachedBundle | None:
    """Return ``cached`` if its files match their checksums; log and count if not."""
    if cached is None:
        return None
    damage = cached.damage()
    if not damage:
        return cached
    FAULTS.labels(CACHE_CORRUPT).inc()
    logger.error(
        "Cached %s version %s in %s is damaged (%s); not using it",
        settings.model_name,
        cached.version,
        cached.path,
        ", ".join(damage[:5])
        + (f" and {len(damage) - 5} more" if len(damage) > 5 else ""),
    )
    return None


def load_champion_bundle_dir(settings: Settings) -> ChampionBundle:
    """Return the local folder of the champion bundle, its version and its source.

    Asks the registry which version is champion and refreshes the cache if it
    changed, was stored without checksums, or no longer matches them (a damaged
    copy is replaced from the registry). If the registry is unreachable or broken,
    logs why, counts it and returns the cached copy if it is intact. When the
    registry answers that there is no champion, when the configured local store
    does not exist (:class:`~model_registry.registry.StoreNotFoundError`), or when
    neither the registry nor an intact cached copy can serve, raises
    :class:`NoChampionError`.

    The registry calls are bounded by the ``registry_*`` settings (see
    :func:`model_registry.tracking.registry_http_environment`), so a registry that
    is down costs one timeout, not MLflow's minutes of retries.
    """
    # A damaged download is the registry's fault too: the intact cached copy serves.
    errors: tuple[type[BaseException], ...] = (
        *registry_errors(),
        CorruptDownloadError,
    )
    try:
        info = champion_version(settings)
        if info is None:
            raise NoChampionError(
                f"No champion model: no version of {settings.model_name!r} has the "
                "'champion' alias. Run 'panda-predictor train' first."
            )
        cached = read_cached(settings)
        if (
            cached is not None
            and cached.version == info.version
            and cached.checksums is not None
            and _intact(cached, settings) is not None
        ):
            _mark_confirmed(settings)
            return ChampionBundle(cached.path, info.version, FROM_REGISTRY)
        path = store_version(settings, info.version)
        _mark_confirmed(settings)
        return ChampionBundle(path, info.version, FROM_REGISTRY)
    except NoChampionError:
        raise
    except errors as exc:
        FAULTS.labels(REGISTRY_DOWN).inc()
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        cached = _intact(read_cached(settings), settings)
        if cached is None:
            raise NoChampionError(
                "No champion model: the model registry at "
                f"{settings.tracking_uri()!r} failed ({reason}) and the cache "
                f"{str(settings.cache_dir())!r} holds no intact copy. Fix the "
                "registry, or run 'panda-predictor train' first."
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


def _mark_confirmed(settings: Settings) -> None:
    """Record that the registry just confirmed the cached champion (cheap: a touch)."""
    (settings.cache_dir() / CONFIRMED).touch()


def recently_confirmed(
    settings: Settings, max_age_seconds: float
) -> ChampionBundle | None:
    """Return the cached champion if the registry confirmed it that recently, else None.

    For short-lived readers (``predict``) that accept a champion up to
    ``max_age_seconds`` old in exchange for not importing MLflow; the copy must
    still match its checksums. Reports source ``cache``.
    """
    if max_age_seconds <= 0:
        return None
    try:
        confirmed = (settings.cache_dir() / CONFIRMED).stat().st_mtime
    except FileNotFoundError:
        return None
    if datetime.now(UTC).timestamp() - confirmed > max_age_seconds:
        return None
    cached = read_cached(settings)
    if cached is None or cached.checksums is None:
        return None
    if _intact(cached, settings) is None:
        return None
    return ChampionBundle(cached.path, cached.version, FROM_CACHE)
