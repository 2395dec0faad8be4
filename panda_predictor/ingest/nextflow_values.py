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
from collections.abc import Callable

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

    :param path: the file, for error messages.
    :param field: the field (header) name.
    :param values: the cells, one per task row.
    :param lines: the file line of each row (1 is the header).
    """

    def __init__(
        self, path: str, field: str, values: list[str], lines: np.ndarray
    ) -> None:
        self.path = path
        self.field = field
        self.text = pd.Series(values, dtype=object).str.strip()
        self.lines = lines
        self.missing = self.text.isin(MISSING).to_numpy()

    def error(self, kind: str, value: str) -> JobLogError:
        """Return the error for the first row holding ``value``."""
        line = int(self.lines[np.flatnonzero(self.text.to_numpy() == value)[0]])
        return JobLogError(
            f"The {self.field!r} field must be {EXPECTED[kind]}. Got {value!r} at "
            f"line {line} of {self.path} instead."
        )

    def numbers(self) -> np.ndarray:
        """Return the cells that are plain numbers as floats (``NaN`` elsewhere)."""
        present = self.text.where(~self.missing)
        return np.array(pd.to_numeric(present, errors="coerce"), dtype=float)

    def rest(self, parsed: np.ndarray) -> np.ndarray:
        """Return a mask of cells present but not parsed yet."""
        return ~self.missing & np.isnan(parsed)

    def check(self, kind: str, values: np.ndarray, minimum: float) -> np.ndarray:
        """Raise for the first value below ``minimum`` or infinite; return them."""
        bad = ~np.isnan(values) & ~((values >= minimum) & np.isfinite(values))
        if bad.any():
            raise self.error(kind, str(self.text.iloc[np.flatnonzero(bad)[0]]))
        return values

    def by_value(self, kind: str, parse: Callable[[str], float | None]) -> np.ndarray:
        """Return the cells parsed one distinct string at a time (raw numbers first).

        ``parse`` returns ``None`` for a string it does not understand: an error.
        """
        out = self.numbers()
        todo = self.rest(out)
        if todo.any():
            wanted = self.text[todo]
            table: dict[str, float] = {}
            for value in wanted.unique():
                number = parse(value)
                if number is None:
                    raise self.error(kind, value)
                table[value] = number
            out[todo] = wanted.map(table).to_numpy(dtype=float)
        return out


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
    return cells.check("size", cells.by_value("size", _size), 0.0)


def durations(cells: Cells) -> np.ndarray:
    """Return a duration field in seconds (raw: milliseconds)."""
    raw = cells.numbers() / 1000.0
    todo = cells.rest(raw)
    if todo.any():
        named = cells.by_value("duration", _duration)
        raw[todo] = named[todo]
    return cells.check("duration", raw, 0.0)


def percents(cells: Cells) -> np.ndarray:
    """Return a percentage field as a number (``87.5%`` and raw ``87.5`` alike)."""
    return cells.check(
        "percent",
        cells.by_value("percent", lambda v: _float(v.removesuffix("%").strip())),
        0.0,
    )


def _float(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def timestamps(cells: Cells) -> np.ndarray:
    """Return a timestamp field in unix seconds (raw: epoch milliseconds).

    Human-readable timestamps carry no time zone (Nextflow writes the run's local
    time); they are read as UTC, so one history should come from one zone.
    """
    out = cells.numbers() / 1000.0
    todo = cells.rest(out)
    if todo.any():
        text = cells.text[todo]
        when = pd.to_datetime(text, format="%Y-%m-%d %H:%M:%S.%f", errors="coerce")
        again = when.isna()
        if again.any():
            when[again] = pd.to_datetime(text[again], format="ISO8601", errors="coerce")
        if when.isna().any():
            raise cells.error("timestamp", str(text[when.isna()].iloc[0]))
        if getattr(when.dt, "tz", None) is not None:
            when = when.dt.tz_convert(None)
        out[todo] = when.to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e9
    return out


def integers(cells: Cells, minimum: float | None = None) -> np.ndarray:
    """Return a field of whole numbers (``exit``, ``cpus``, ``attempt``)."""
    kind = "integer" if minimum is None else "count"
    out = cells.numbers()
    todo = cells.rest(out)
    if todo.any():
        raise cells.error(kind, str(cells.text[todo].iloc[0]))
    fractional = ~np.isnan(out) & (out != np.round(out))
    if fractional.any():
        raise cells.error(kind, str(cells.text.iloc[np.flatnonzero(fractional)[0]]))
    return out if minimum is None else cells.check(kind, out, minimum)
