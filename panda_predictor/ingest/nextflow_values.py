"""Parse the values of a Nextflow trace file, human-readable or raw, column by column.

Nextflow writes sizes, durations, percentages and timestamps either for people
(``1.5 GB``, ``3m 4s``, ``87.5%``, ``2024-03-01 10:11:12.345``) or, with
``trace.raw = true``, as plain numbers (bytes, milliseconds, epoch milliseconds).
Each column is parsed as a whole: plain numbers in one vectorised step, the other
distinct strings once each, so a 100,000-task trace reads in seconds. ``-`` or an
empty cell means "not recorded" (``NaN``). A value that is neither raises a
:class:`~panda_predictor.ingest.files.JobLogError` naming the field, the line and
the value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from panda_predictor.ingest.files import JobLogError

#: Cells that mean "not recorded".
MISSING = ("", "-")
#: Size units (Nextflow's ``MemoryUnit``: powers of 1024) -> bytes.
SIZE_UNITS: dict[str, float] = {
    unit: 1024.0**power
    for power, names in enumerate(
        (
            ("b", "bytes"),
            ("kb", "k", "kib"),
            ("mb", "m", "mib"),
            ("gb", "g", "gib"),
            ("tb", "t", "tib"),
            ("pb", "p", "pib"),
            ("eb", "e", "eib"),
        )
    )
    for unit in names
}
#: Duration units (Nextflow's ``Duration``) -> seconds.
DURATION_UNITS: dict[str, float] = {
    **dict.fromkeys(("ms", "milli", "millis"), 1e-3),
    **dict.fromkeys(("s", "sec", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
}
#: What each kind of field must be, for the error message.
EXPECTED: dict[str, str] = {
    "size": "a size >= 0: bytes, or a number and a unit (B, KB, MB, GB, TB, PB, EB)",
    "duration": "a duration >= 0: milliseconds, or numbers with units (ms, s, m, h, "
    "d), e.g. '3m 4s'",
    "percent": "a percentage >= 0, e.g. '87.5%' or '87.5'",
    "timestamp": "a timestamp: 'YYYY-MM-DD HH:MM:SS.mmm' or epoch milliseconds",
    "count": "a whole number >= 1",
    "integer": "a whole number",
}
_SIZE = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]+)$")
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)\s*([A-Za-z]+)\s*")


class Cells:
    """One file's cells of one field, with the line each came from, for parsing.

    The cells are factorised once: each distinct string is parsed once, and the
    values are taken back per row by code (a trace repeats most values).

    :param path: the file, for error messages.
    :param field: the field (header) name.
    :param values: the cells, one per task row.
    :param lines: the file line of each row (1 is the header).
    """

    def __init__(
        self,
        path: str,
        field: str,
        values: Sequence[str] | np.ndarray,
        lines: np.ndarray,
    ) -> None:
        self.path = path
        self.field = field
        self.lines = lines
        codes, uniques = pd.factorize(np.asarray(values, dtype=object))
        self.codes = codes
        self.uniques = np.array([str(u).strip() for u in uniques], dtype=object)
        self.unique_missing = np.isin(self.uniques, MISSING)
        self.missing = self.unique_missing[codes] if codes.size else np.zeros(0, bool)

    def texts(self) -> np.ndarray:
        """Return the stripped cells, ``None`` where missing."""
        uniques = self.uniques.copy()
        uniques[self.unique_missing] = None
        return uniques[self.codes] if self.codes.size else np.zeros(0, object)

    def error(self, kind: str, unique: int) -> JobLogError:
        """Return the error for the first row holding the distinct value ``unique``."""
        line = int(self.lines[np.flatnonzero(self.codes == unique)[0]])
        return JobLogError(
            f"The {self.field!r} field must be {EXPECTED[kind]}. Got "
            f"{self.uniques[unique]!r} at line {line} of {self.path} instead."
        )

    def parse(
        self,
        kind: str,
        number: Callable[[float], float],
        named: Callable[[str], float | None],
        minimum: float | None = 0.0,
    ) -> np.ndarray:
        """Return the cells as floats: plain numbers through ``number``, the other
        strings through ``named`` (``None``: not understood, an error).

        :param minimum: values below it (or infinite) are errors; ``None``: any.
        """
        out = np.full(len(self.uniques), np.nan)
        present = np.flatnonzero(~self.unique_missing)
        try:
            # A raw column (trace.raw = true) converts in one step.
            plain = self.uniques[present].astype(float)
        except ValueError:
            plain = None
        if plain is not None:
            out[present] = number(plain)  # type: ignore[arg-type]
            low = -np.inf if minimum is None else minimum
            bad = ~(np.isfinite(out[present]) & (out[present] >= low))
            if bad.any():
                raise self.error(kind, int(present[np.flatnonzero(bad)[0]]))
            return out[self.codes] if self.codes.size else np.zeros(0)
        for k, value in enumerate(self.uniques):
            if self.unique_missing[k]:
                continue
            raw = _float(value)
            parsed = number(raw) if raw is not None else named(value)
            if parsed is None or not math.isfinite(parsed):
                raise self.error(kind, k)
            if minimum is not None and parsed < minimum:
                raise self.error(kind, k)
            out[k] = parsed
        return out[self.codes] if self.codes.size else np.zeros(0)


def _size(value: str) -> float | None:
    match = _SIZE.match(value)
    if match is None:
        return None
    factor = SIZE_UNITS.get(match.group(2).lower())
    return None if factor is None else float(match.group(1)) * factor


def _duration(value: str) -> float | None:
    total, end = 0.0, 0
    for match in _DURATION_PART.finditer(value):
        if match.start() != end:
            return None
        factor = DURATION_UNITS.get(match.group(2).lower())
        if factor is None:
            return None
        total += float(match.group(1)) * factor
        end = match.end()
    return total if end == len(value) and end > 0 else None


def sizes(cells: Cells) -> np.ndarray:
    """Return a size field in bytes (raw: bytes already)."""
    return cells.parse("size", lambda b: b, _size)


def durations(cells: Cells) -> np.ndarray:
    """Return a duration field in seconds (raw: milliseconds)."""
    return cells.parse("duration", lambda ms: ms / 1000.0, _duration)


def percents(cells: Cells) -> np.ndarray:
    """Return a percentage field as a number (``87.5%`` and raw ``87.5`` alike)."""
    return cells.parse("percent", lambda p: p, lambda v: _float(v.removesuffix("%")))


def _float(value: str) -> float | None:
    """Return a plain finite number, else ``None`` (a unit, a date, a word)."""
    # Most human-readable cells end in a unit or hold a space or a colon: skip the
    # exception float() would raise for each of them.
    last = value[-1:]
    if not (last.isdigit() or last == ".") or " " in value or ":" in value:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def timestamps(cells: Cells) -> np.ndarray:
    """Return a timestamp field in unix seconds (raw: epoch milliseconds).

    Human-readable timestamps carry no time zone (Nextflow writes the run's local
    time); they are read as UTC, so one history should come from one zone. Every
    distinct value is unique here, so the column is parsed in vectorised passes:
    Nextflow's format, then plain numbers, then ISO 8601.
    """
    present = np.flatnonzero(~cells.unique_missing)
    try:
        # A raw column (epoch milliseconds) converts in one step.
        return cells.parse("timestamp", lambda ms: ms / 1000.0, _never, minimum=None)
    except JobLogError:
        pass
    text = pd.Series(cells.uniques[present], dtype=object)
    seconds = np.full(len(cells.uniques), np.nan)
    stamp = pd.to_datetime(text, format="%Y-%m-%d %H:%M:%S.%f", errors="coerce")
    found = stamp.notna().to_numpy()
    seconds[present[found]] = _unix(stamp[found])
    rest = ~found
    if rest.any():
        numbers = pd.to_numeric(text[rest], errors="coerce").to_numpy(dtype=float)
        seconds[present[rest]] = numbers / 1000.0
        rest[rest] = np.isnan(numbers)
    if rest.any():
        iso = pd.to_datetime(text[rest], format="ISO8601", errors="coerce", utc=True)
        ok = iso.notna().to_numpy()
        if not ok.all():
            raise cells.error("timestamp", int(present[np.flatnonzero(rest)[~ok][0]]))
        seconds[present[rest]] = _unix(iso.dt.tz_convert(None))
    bad = ~cells.unique_missing & ~np.isfinite(seconds)
    if bad.any():
        raise cells.error("timestamp", int(np.flatnonzero(bad)[0]))
    return seconds[cells.codes] if cells.codes.size else np.zeros(0)


def _never(value: str) -> None:
    """Return ``None``: no named form is understood (raw numbers only)."""
    return None


def _unix(stamp: pd.Series) -> np.ndarray:
    """Return timestamps as unix seconds."""
    return stamp.to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e9


def integers(cells: Cells, minimum: float | None = None) -> np.ndarray:
    """Return a field of whole numbers (``exit``, ``cpus``, ``attempt``)."""
    kind = "integer" if minimum is None else "count"
    out = cells.parse(kind, lambda x: x, lambda v: None, minimum=minimum)
    fractional = ~np.isnan(out) & (out != np.round(out))
    if fractional.any():
        raise cells.error(kind, int(cells.codes[np.flatnonzero(fractional)[0]]))
    return out
