"""Open job logs as text, gzip or plain by content; the error for a bad job log.

Archives and sites name compressed files inconsistently (``.gz``, ``.swf``, none),
so the gzip magic bytes decide, never the suffix.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO

from panda_predictor.errors import UserInputError

GZIP_MAGIC = b"\x1f\x8b"


class JobLogError(UserInputError):
    """Raised when a job log, or an option for reading it, is not what it must be.

    A :class:`ValueError` (through :class:`UserInputError`), so the command line
    prints its message as one line instead of a traceback.
    """


def is_gzip(path: Path) -> bool:
    """Return whether the file starts with the gzip magic bytes."""
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def open_text(path: Path) -> IO[str]:
    """Return the file opened as UTF-8 text, decompressing gzip on the fly."""
    if is_gzip(path):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def read_head(path: Path, n_chars: int = 4096) -> str:
    """Return the first ``n_chars`` characters of the text.

    Enough to tell formats apart without reading a large log twice. A gzip stream
    cut off before ``n_chars`` raises :class:`EOFError`.
    """
    with open_text(path) as fh:
        return fh.read(n_chars)
