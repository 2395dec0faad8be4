"""Print the gate's verdicts as a table a person can check at a glance.

Per metric: the champion's and the challenger's figure, their difference, the
tolerance and the noise the gate allowed on top, the binding floor or replay goal
and the verdict.
Knows the verdicts only by their attributes, so the gate can import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol


class Verdict(Protocol):
    """What the table reads of a :class:`model_registry.gate.MetricVerdict`."""

    @property
    def metric(self) -> str: ...

    @property
    def better(self) -> str: ...

    @property
    def challenger(self) -> float | None: ...

    @property
    def champion(self) -> float | None: ...

    @property
    def tolerance(self) -> float: ...

    @property
    def champion_noise(self) -> float: ...

    @property
    def passed_champion(self) -> bool | None: ...

    @property
    def floor(self) -> float | None: ...

    @property
    def floor_name(self) -> str | None: ...

    @property
    def passed_floor(self) -> bool | None: ...

    @property
    def passed(self) -> bool: ...


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


TABLE_COLUMNS = (
    "metric",
    "better",
    "champion",
    "challenger",
    "diff",
    "tolerance",
    "noise",
    "floor",
    "verdict",
)


def _verdict_word(v: Verdict) -> str:
    if v.passed:
        return "ok"
    if v.passed_champion is False and v.passed_floor is False:
        return "WORSE+FLOOR"
    if v.passed_champion is False:
        return "WORSE"
    return "OVER GOAL" if v.better == "lower" else "BELOW FLOOR"


def _floor_cell(v: Verdict) -> str:
    """Return the floor or goal as its check reads: ``> best_recency 0.7000``,
    ``<= scouts 1.4200``."""
    if v.floor is None:
        return ""
    sign = "<=" if v.better == "lower" else ">"
    return f"{sign} {v.floor_name} {v.floor:.4f}" if v.floor_name else _fmt(v.floor)


def verdict_table(verdicts: Iterable[Verdict]) -> list[str]:
    """Return the verdicts as aligned text lines (header first; empty: no lines).

    ``diff`` is challenger minus champion; ``tolerance`` is how much worse it may
    be on top of ``noise`` (the champion comparison's); ``floor`` the binding floor
    or replay goal, with the check it must pass.
    """
    rows = [
        (
            v.metric,
            v.better,
            _fmt(v.champion),
            _fmt(v.challenger),
            "none"
            if v.challenger is None or v.champion is None
            else f"{v.challenger - v.champion:+.4f}",
            f"{v.tolerance:.4f}",
            f"{v.champion_noise:.4f}",
            _floor_cell(v),
            _verdict_word(v),
        )
        for v in verdicts
    ]
    return aligned_lines(TABLE_COLUMNS, rows)


def aligned_lines(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Return ``header`` and ``rows`` as text lines in columns: the first left-,
    the others right-aligned, two spaces apart (no rows: no lines)."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    return [line(header), *(line(r) for r in rows)]
