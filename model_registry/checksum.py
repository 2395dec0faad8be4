"""SHA-256 checksums of bundle folders, so a damaged copy is noticed before it serves.

A bundle is a folder of files; its checksum is one SHA-256 per file (by path relative
to the folder) and a *tree digest* over that sorted list. The registry stores the tree
digest as a version tag when the bundle is registered; the local cache stores the
per-file list next to its copy, so a changed, truncated, missing or extra file is
found and named.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

#: Version tag holding the bundle's tree digest.
DIGEST_TAG = "bundle_sha256"
_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """Return the hex SHA-256 of one file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def folder_checksums(folder: Path | str) -> dict[str, str]:
    """Return ``{relative posix path: sha256}`` of every file under ``folder``."""
    root = Path(folder)
    return {
        path.relative_to(root).as_posix(): file_sha256(path)
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def tree_digest(checksums: Mapping[str, str]) -> str:
    """Return one SHA-256 over the sorted ``path sha256`` lines of a folder."""
    lines = "".join(f"{path}\t{checksums[path]}\n" for path in sorted(checksums))
    return hashlib.sha256(lines.encode()).hexdigest()


def differences(expected: Mapping[str, str], found: Mapping[str, str]) -> list[str]:
    """Return the paths that changed, went missing or appeared (empty: intact)."""
    changed = [p for p in expected if p in found and found[p] != expected[p]]
    missing = [p for p in expected if p not in found]
    extra = [p for p in found if p not in expected]
    return (
        [f"{p} (changed)" for p in sorted(changed)]
        + [f"{p} (missing)" for p in sorted(missing)]
        + [f"{p} (unexpected)" for p in sorted(extra)]
    )
