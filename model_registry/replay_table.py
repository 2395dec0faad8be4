"""The gate's replay against the scouts, as a table a person reads.

The product's headline figure is whether the served decision fails no more jobs
and wastes no more than running the scouts (docs/decisions.md). The gate measures
exactly that on every training run's test tasks (their jobs replayed with their
true use, :mod:`pipelines.retraining.gate_evidence`), but as metric names in one
long reason. This module lays the same figures out per target: failed jobs and
wasted hours per job, the served decision beside the scouts, and the share of
tasks that keep their scouts. Every training report opens with it, the
monitoring page shows it under the gate's verdict, and ``train`` and the demo
print it.

Reads the evidence's two mappings (the challenger's metrics and the scouts'
figures), so it needs nothing of a training run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from model_registry.gate import SCOUTS, SERVED_DELAY
from panda_predictor.core.replay.goals import MAX_DELAY_SHARE

#: Wasted hours are GB-hours for memory, core-hours for time.
WASTE_UNITS = {"ramcount": "GB-h"}
DEFAULT_WASTE_UNIT = "core-h"


@dataclass(frozen=True)
class ReplayRow:
    """One target's replayed figures: the served decision's and the scouts'."""

    target: str
    failed: float
    scouts_failed: float
    wasted: float
    scouts_wasted: float

    @property
    def unit(self) -> str:
        """Return the unit of the wasted hours (GB-h for memory, else core-h)."""
        return WASTE_UNITS.get(self.target, DEFAULT_WASTE_UNIT)


def replay_rows(
    served: Mapping[str, float], scouts: Mapping[str, float]
) -> list[ReplayRow]:
    """Return a row per target replayed on both sides, in the order ``served``
    names them.

    :param served: the challenger's metrics (``served.<target>.failed_jobs`` and
        ``served.<target>.wasted_hours``, among others).
    :param scouts: the scouts' figures under the same names.
    """
    rows = []
    for name, failed in served.items():
        parts = name.split(".")
        if len(parts) != 3 or parts[0] != "served" or parts[2] != "failed_jobs":
            continue
        waste = f"served.{parts[1]}.wasted_hours"
        if name in scouts and waste in served and waste in scouts:
            rows.append(
                ReplayRow(parts[1], failed, scouts[name], served[waste], scouts[waste])
            )
    return rows


COLUMNS = ("target", "failed jobs", "scouts", "wasted h per job", "scouts")


def replay_text(served: Mapping[str, float], scouts: Mapping[str, float]) -> list[str]:
    """Return the replay as aligned text lines: a header, a row per target, and
    the share of tasks that keep their scouts (no replayed target: no lines)."""
    rows = replay_rows(served, scouts)
    cells = [
        (
            r.target,
            f"{r.failed:.3f}",
            f"{r.scouts_failed:.3f}",
            f"{r.wasted:.3g} {r.unit}",
            f"{r.scouts_wasted:.3g} {r.unit}",
        )
        for r in rows
    ]
    if not cells:
        return []
    widths = [max(len(c[i]) for c in [COLUMNS, *cells]) for i in range(len(COLUMNS))]

    def line(row: tuple[str, ...]) -> str:
        first = row[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest])

    lines = [line(COLUMNS), *(line(c) for c in cells)]
    if SERVED_DELAY in served:
        lines.append(kept_scouts_text(served[SERVED_DELAY]))
    return lines


#: Prefix of the scouts' figures among a run's metrics (``scouts.<target>.
#: failed_jobs``): the gate names them as the challenger's, ``served.``...
SCOUTS_PREFIX = "scouts."


def replay_metrics(
    served: Mapping[str, float], scouts: Mapping[str, float]
) -> dict[str, float]:
    """Return the replay as run metrics: the served decision's figures under
    their names, the scouts' under :data:`SCOUTS_PREFIX` (``model show`` reads
    them back with :func:`split_replay_metrics`)."""
    out: dict[str, float] = {}
    for row in replay_rows(served, scouts):
        for kind, mine, theirs in (
            ("failed_jobs", row.failed, row.scouts_failed),
            ("wasted_hours", row.wasted, row.scouts_wasted),
        ):
            out[f"served.{row.target}.{kind}"] = mine
            out[f"{SCOUTS_PREFIX}{row.target}.{kind}"] = theirs
    if out and SERVED_DELAY in served:
        out[SERVED_DELAY] = served[SERVED_DELAY]
    return out


def split_replay_metrics(
    metrics: Mapping[str, float],
) -> tuple[dict[str, float], dict[str, float]]:
    """Return (served, scouts) figures of a run's metrics, the scouts' renamed as
    the gate names them, ready for :func:`replay_text`."""
    scouts = {
        "served." + k.removeprefix(SCOUTS_PREFIX): v
        for k, v in metrics.items()
        if k.startswith(SCOUTS_PREFIX)
    }
    return dict(metrics), scouts


#: What the command line prints above the table.
HEADING = "The decision replayed on the test tasks' jobs against the scouts:"


def replay_block(evidence: object) -> list[str]:
    """Return the gate evidence's replay as printed lines: :data:`HEADING`, then
    the table indented (none when the run could not be replayed).

    ``evidence`` is a :class:`model_registry.gate.GateEvidence` or None.
    """
    served = getattr(evidence, "challenger", None) or {}
    scouts = (getattr(evidence, "floors", None) or {}).get(SCOUTS, {})
    return replay_block_of(served, scouts)


def replay_block_of(
    served: Mapping[str, float], scouts: Mapping[str, float]
) -> list[str]:
    """Return :data:`HEADING` and the replay's table indented (none: no lines)."""
    table = replay_text(served, scouts)
    return [HEADING, *(f"  {line}" for line in table)] if table else []


def replay_markdown(
    served: Mapping[str, float], scouts: Mapping[str, float]
) -> list[str]:
    """Return the replay as a markdown table and the share of tasks that keep
    their scouts (no replayed target: no lines)."""
    rows = replay_rows(served, scouts)
    if not rows:
        return []
    lines = [
        "| target | failed jobs | scouts' failed jobs | wasted hours per job | "
        "scouts' wasted hours per job |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r.target} | {r.failed:.3f} | {r.scouts_failed:.3f} | "
        f"{r.wasted:.3g} {r.unit} | {r.scouts_wasted:.3g} {r.unit} |"
        for r in rows
    ]
    if SERVED_DELAY in served:
        lines += ["", kept_scouts_text(served[SERVED_DELAY])]
    return lines


def kept_scouts_text(delay_share: float) -> str:
    """Return the share of tasks that keep their scouts, in words."""
    return (
        f"Tasks that keep their scouts: {100 * delay_share:.1f} % (with scouts: "
        f"100 %; the goal: at most {100 * MAX_DELAY_SHARE:.0f} %)."
    )
