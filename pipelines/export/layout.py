"""Where the exporter puts each table and month, and how it remembers what is done.

The layout is Hive-style, the one Spark's partition discovery and ATLAS analytics'
HDFS copies use: ``DIR/<table>/month=YYYY-MM/part-0.parquet``. Rows whose time
column is NULL go to ``month=none``. ``DIR/_manifest.json`` lists each finished
month with its verified row count, so a rerun skips it; a month that was still
running when exported (its end lies after the export) is not final and is exported
again. Files being written start with a dot, which Spark and pyarrow skip.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from panda_predictor.errors import UserInputError

MANIFEST = "_manifest.json"
MANIFEST_VERSION = 1
#: Partition value of the rows whose time column is NULL.
NO_MONTH = "none"


@dataclass(frozen=True)
class Month:
    """One calendar month ``[start, end)``, or the NULL-time rows when start is None."""

    start: datetime | None
    end: datetime | None

    @property
    def key(self) -> str:
        """Return the partition value: ``YYYY-MM`` or ``none``."""
        return NO_MONTH if self.start is None else f"{self.start:%Y-%m}"


def months_between(first: datetime, last: datetime) -> list[Month]:
    """Return every calendar month from ``first``'s to ``last``'s, both included."""
    months = []
    start = datetime(first.year, first.month, 1)
    while start <= last:
        end = datetime(start.year + start.month // 12, start.month % 12 + 1, 1)
        months.append(Month(start, end))
        start = end
    return months


def part_path(root: Path, table: str, month: Month) -> Path:
    """Return the Parquet file of ``table`` for ``month`` under ``root``."""
    return root / table / f"month={month.key}" / "part-0.parquet"


class Manifest:
    """The finished months per table, kept in ``DIR/_manifest.json``.

    Saved after every month (write to a dot file, then rename), so an export killed
    at any point resumes from the first month not recorded.
    """

    def __init__(self, root: Path) -> None:
        self.path = root / MANIFEST
        self.tables: dict[str, dict[str, dict[str, Any]]] = {}
        if self.path.exists():
            stored = json.loads(self.path.read_text())
            if stored.get("version") != MANIFEST_VERSION:
                raise UserInputError(
                    f"The export manifest {self.path} must have version "
                    f"{MANIFEST_VERSION}. Got {stored.get('version')!r} instead; "
                    "export into an empty folder."
                )
            self.tables = stored["tables"]

    def is_final(self, table: str, month: Month) -> bool:
        """Return whether ``month`` of ``table`` was exported whole and is final."""
        entry = self.tables.get(table, {}).get(month.key)
        return bool(entry and entry.get("final"))

    def record(self, table: str, month: Month, rows: int, final: bool) -> None:
        """Record a verified month and save the manifest atomically."""
        self.tables.setdefault(table, {})[month.key] = {"rows": rows, "final": final}
        tmp = self.path.with_name("." + self.path.name + ".tmp")
        tmp.write_text(
            json.dumps({"version": MANIFEST_VERSION, "tables": self.tables}, indent=1)
        )
        os.replace(tmp, self.path)
