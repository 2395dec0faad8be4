"""The gate's replay against the scouts, as a table a person reads.

The product's headline figure is whether the served decision fails no more jobs
and wastes no more than running the scouts (docs/decisions.md). The gate measures
exactly that on every training run's test tasks (their jobs replayed with their
true use, :mod:`pipelines.retraining.gate_evidence`), but as metric names in one
long reason. :class:`Replay` lays the same figures out per target: failed jobs
and wasted hours per job, the served decision beside the scouts, and the share of
tasks that keep their scouts. Every training report opens with it, the
monitoring page shows it under the gate's verdict, and ``train``, ``model show``
and the demo print it; each cell is formatted here once (:meth:`ReplayRow.cells`).

Reads the evidence's two mappings (the challenger's metrics and the scouts'
figures), so it needs nothing of a training run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from model_registry.gate import SCOUTS, SERVED_DELAY, MetricVerdict
from model_registry.verdict_table import aligned_lines
from panda_predictor.core.decide.cost_choice import KIND_OF, MEMORY
from panda_predictor.core.replay.goals import MAX_DELAY_SHARE

#: Column names of the tables (the training report, the monitoring page).
HEADERS = (
    "target",
    "failed jobs",
    "scouts' failed jobs",
    "wasted hours per job",
    "scouts' wasted hours per job",
)
#: The same columns, short, for a terminal.
SHORT_HEADERS = ("target", "failed jobs", "scouts", "wasted h per job", "scouts")
#: The column a terminal table adds where the gate's verdicts are known.
GOAL_HEADER = "goals"
#: What that column means, printed under the table.
GOAL_NOTE = (
    "goals (the gate's): failed jobs and waste at most the scouts' plus the noise "
    "over resampled test days."
)
#: What the command line prints above the table.
HEADING = "The decision replayed on the test tasks' jobs against the scouts:"
#: Prefix of the scouts' figures among a run's metrics (``scouts.<target>.
#: failed_jobs``); the gate names them as the challenger's, ``served.``...
SCOUTS_PREFIX = "scouts."


@dataclass(frozen=True)
class ReplayRow:
    """One target's replayed figures: the served decision's and the scouts'."""

    target: str
    failed: float
    scouts_failed: float
    wasted: float
    scouts_wasted: float
    #: Whether the gate found both figures within their goals (None: not judged).
    goals_met: bool | None = None

    @property
    def unit(self) -> str:
        """Return the unit of the wasted hours: GB-h for memory, core-h for time
        (the served replay's own split, ``cost_choice.KIND_OF``)."""
        return "GB-h" if KIND_OF.get(self.target) == MEMORY else "core-h"

    def cells(self) -> tuple[str, ...]:
        """Return the row's cells as every table prints them (:data:`HEADERS`)."""
        return (
            self.target,
            f"{self.failed:.3f}",
            f"{self.scouts_failed:.3f}",
            f"{self.wasted:.3g} {self.unit}",
            f"{self.scouts_wasted:.3g} {self.unit}",
        )


@dataclass(frozen=True)
class Replay:
    """The rows of every target replayed on both sides, and the share of tasks
    that keep their scouts (None: not measured)."""

    rows: tuple[ReplayRow, ...] = ()
    kept_scouts: float | None = None

    def kept_scouts_text(self) -> str:
        """Return the share of tasks that keep their scouts, in words ("" when
        it was not measured)."""
        if self.kept_scouts is None:
            return ""
        return (
            f"Tasks that keep their scouts: {100 * self.kept_scouts:.1f} % (with "
            f"scouts: 100 %; the goal: at most {100 * MAX_DELAY_SHARE:.0f} %)."
        )


def replay_of(served: Mapping[str, float], scouts: Mapping[str, float]) -> Replay:
    """Return the :class:`Replay` of the gate's figures: a row per target that
    both sides replayed, in the order ``served`` names them.

    :param served: the challenger's metrics (``served.<target>.failed_jobs`` and
        ``served.<target>.wasted_hours``, ``served.delay_share``, among others).
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
    return Replay(tuple(rows), served.get(SERVED_DELAY) if rows else None)


def evidence_replay(evidence: object) -> Replay:
    """Return the :class:`Replay` of a :class:`model_registry.gate.GateEvidence`
    (or of None: no rows)."""
    served = getattr(evidence, "challenger", None) or {}
    scouts = (getattr(evidence, "floors", None) or {}).get(SCOUTS, {})
    return replay_of(served, scouts)


def with_verdicts(replay: Replay, verdicts: Iterable[MetricVerdict]) -> Replay:
    """Return ``replay`` with each row's :attr:`ReplayRow.goals_met` from the gate's
    verdicts on ``served.<target>.failed_jobs`` and ``.wasted_hours``.

    The table's figures alone mislead where a goal is met within the noise (the
    demo's run time: 0.0015 of the jobs failed against the scouts' 0.0005, noise
    0.0010): the row then says so instead of leaving the reader to guess.
    """
    passed = {v.metric: v.passed_floor for v in verdicts}

    def met(row: ReplayRow) -> bool | None:
        checks = [
            passed.get(f"served.{row.target}.{kind}")
            for kind in ("failed_jobs", "wasted_hours")
        ]
        return None if None in checks else all(checks)

    return replace(
        replay, rows=tuple(replace(r, goals_met=met(r)) for r in replay.rows)
    )


def replay_block(replay: Replay) -> list[str]:
    """Return the replay as printed lines: :data:`HEADING`, the table in columns
    (with a :data:`GOAL_HEADER` column where the gate judged every row) and the
    share of tasks that keep their scouts, indented (no rows: none)."""
    if not replay.rows:
        return []
    judged = all(r.goals_met is not None for r in replay.rows)
    headers = (*SHORT_HEADERS, GOAL_HEADER) if judged else SHORT_HEADERS
    cells = [
        (*r.cells(), "met" if r.goals_met else "missed") if judged else r.cells()
        for r in replay.rows
    ]
    table = aligned_lines(headers, cells)
    notes = [GOAL_NOTE] if judged else []
    if replay.kept_scouts is not None:
        notes.append(replay.kept_scouts_text())
    return [HEADING, *(f"  {line}" for line in [*table, *notes])]


def replay_metrics(replay: Replay) -> dict[str, float]:
    """Return the replay as run metrics: the served decision's figures under the
    gate's names, the scouts' under :data:`SCOUTS_PREFIX` (``model show`` reads
    them back with :func:`replay_from_metrics`)."""
    out: dict[str, float] = {}
    for row in replay.rows:
        for kind, mine, theirs in (
            ("failed_jobs", row.failed, row.scouts_failed),
            ("wasted_hours", row.wasted, row.scouts_wasted),
        ):
            out[f"served.{row.target}.{kind}"] = mine
            out[f"{SCOUTS_PREFIX}{row.target}.{kind}"] = theirs
    if replay.kept_scouts is not None:
        out[SERVED_DELAY] = replay.kept_scouts
    return out


def replay_from_metrics(metrics: Mapping[str, float]) -> Replay:
    """Return the :class:`Replay` a run's metrics hold (:func:`replay_metrics`)."""
    scouts = {
        "served." + k.removeprefix(SCOUTS_PREFIX): v
        for k, v in metrics.items()
        if k.startswith(SCOUTS_PREFIX)
    }
    return replay_of(metrics, scouts)
