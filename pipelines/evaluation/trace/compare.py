"""Compare a design choice's benchmark run with its base, pair by pair.

Every design choice is tried on the development parts first (``benchmark --dev``)
and judged by its worst log, not its average (docs/evaluation.md). Reading two
goal tables side by side for 19 pairs of log and target is slow and easy to get
wrong, so this prints, per pair, what moved between the base run and the
candidate (the replay goals against the scouts, the failed jobs and wasted hours,
the top-label ECE and the macro-F1 lead), then the totals and every goal the
candidate loses or gains. A choice that loses a goal anywhere is not a clear win,
whatever it gains elsewhere, so the command exits 1 when the candidate loses one.

Run (on two benchmark homes' results, matched by their folder names)::

    python -m pipelines.evaluation.trace.compare BASE/benchmarks CANDIDATE/benchmarks
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from panda_predictor.core.replay.goals import GOALS, goal_marks
from pipelines.evaluation.trace.summary import (
    ECE_GOAL,
    PRODUCTION,
    production_replay,
)

HEADER = (
    "| log | target | replay goals | failed jobs (scouts) | wasted hours (scouts) "
    "| ECE | lead |\n" + "|---" * 7 + "|"
)


@dataclass(frozen=True)
class PairFigures:
    """One log and target's figures in one run (None: the run has none)."""

    goals: dict[str, bool] | None
    failed: float | None
    scouts_failed: float | None
    wasted: float | None
    scouts_wasted: float | None
    ece: float | None
    lead: float | None

    @property
    def replay_met(self) -> bool | None:
        """Whether all four replay goals are met (None: not replayed)."""
        return None if self.goals is None else all(self.goals.values())

    @property
    def calibrated(self) -> bool | None:
        """Whether the ECE meets the calibration goal (None: not measured)."""
        return None if self.ece is None else self.ece <= ECE_GOAL


def pair_figures(full: dict[str, Any], target: str) -> PairFigures:
    """Return the figures of one target of one benchmark result (full.json)."""
    replay = production_replay(full.get("replay", {}).get(target, []))
    goals = failed = scouts_failed = wasted = scouts_wasted = None
    if replay is not None:
        ours, scouts, key = replay.ours, replay.scouts, replay.waste
        goals = {g: bool(replay.goals[g]) for g in GOALS}
        failed, scouts_failed = ours["failed_job_rate"], scouts["failed_job_rate"]
        wasted, scouts_wasted = ours[key], scouts[key]
    calibration = full.get("calibration", {}).get(target, {}).get(PRODUCTION, {})
    lead = full.get("macro_f1_lead", {}).get(target, {})
    return PairFigures(
        goals,
        failed,
        scouts_failed,
        wasted,
        scouts_wasted,
        calibration.get("ece"),
        lead.get("margin"),
    )


def load_runs(folder: Path) -> dict[str, dict[str, Any]]:
    """Return each benchmark result under ``folder`` (``*/full.json``) by log."""
    runs = {
        path.parent.name: json.loads(path.read_text())
        for path in sorted(folder.glob("*/full.json"))
    }
    if not runs:
        raise FileNotFoundError(
            f"The folder {str(folder)!r} must hold benchmark results "
            "(<log>/full.json, as `panda-predictor benchmark` writes them under "
            "<home>/benchmarks). Got none instead."
        )
    return runs


def _moved(before: float | None, after: float | None, form: str) -> str:
    """Return ``before -> after`` in ``form`` ("-" for a missing figure)."""
    if before is None and after is None:
        return "n/a"
    shown = ["-" if v is None else format(v, form) for v in (before, after)]
    return " -> ".join(shown)


def _marks(goals: dict[str, bool] | None) -> str:
    return "n/a" if goals is None else goal_marks(goals)


def compare_pair(log: str, target: str, base: PairFigures, cand: PairFigures) -> str:
    """Return one table row: each figure as base -> candidate."""
    scouts = "" if cand.scouts_failed is None else f" ({cand.scouts_failed:.4f})"
    scouts_w = "" if cand.scouts_wasted is None else f" ({cand.scouts_wasted:.4g})"
    return (
        f"| {log} | {target} | {_marks(base.goals)} -> {_marks(cand.goals)} | "
        f"{_moved(base.failed, cand.failed, '.4f')}{scouts} | "
        f"{_moved(base.wasted, cand.wasted, '.4g')}{scouts_w} | "
        f"{_moved(base.ece, cand.ece, '.3f')} | "
        f"{_moved(base.lead, cand.lead, '+.3f')} |"
    )


def goal_changes(
    pairs: dict[tuple[str, str], tuple[PairFigures, PairFigures]],
) -> tuple[list[str], list[str]]:
    """Return the goals the candidate loses and those it gains, one line each."""
    lost, gained = [], []
    for (log, target), (base, cand) in pairs.items():
        for goal in GOALS:
            before = None if base.goals is None else base.goals[goal]
            after = None if cand.goals is None else cand.goals[goal]
            if before is True and after is False:
                lost.append(f"{log} {target}: replay {goal}")
            elif before is False and after is True:
                gained.append(f"{log} {target}: replay {goal}")
        if base.calibrated is True and cand.calibrated is False:
            lost.append(f"{log} {target}: ECE {base.ece:.3f} -> {cand.ece:.3f}")
        elif base.calibrated is False and cand.calibrated is True:
            gained.append(f"{log} {target}: ECE {base.ece:.3f} -> {cand.ece:.3f}")
    return lost, gained


def _count(values: list[bool | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{sum(known)} of {len(known)}"


def _worst_ece(pairs: dict[tuple[str, str], PairFigures]) -> str:
    known = [
        (f.ece, f"{log} {target}")
        for (log, target), f in pairs.items()
        if f.ece is not None
    ]
    if not known:
        return "n/a"
    ece, where = max(known)
    return f"{ece:.3f} ({where})"


def compare(
    base: dict[str, dict[str, Any]], candidate: dict[str, dict[str, Any]]
) -> tuple[list[str], list[str]]:
    """Return the comparison's lines (the table, the totals and the goal
    changes) and the goals the candidate loses.

    Only the logs both runs hold are compared; the others are named. Runs
    without a log in common raise ValueError (a development run, whose folders
    end in ``-dev``, against a test-part run, say).
    """
    logs = sorted(set(base) & set(candidate))
    if not logs:
        raise ValueError(
            "The base and candidate runs must hold at least one log in common. "
            f"Got {sorted(base)} and {sorted(candidate)} instead."
        )
    pairs: dict[tuple[str, str], tuple[PairFigures, PairFigures]] = {}
    for log in logs:
        targets = list(candidate[log].get("full_scores", {}))
        for target in targets:
            pairs[(log, target)] = (
                pair_figures(base[log], target),
                pair_figures(candidate[log], target),
            )
    lines = [HEADER]
    lines += [compare_pair(log, t, b, c) for (log, t), (b, c) in pairs.items()]
    before = {k: b for k, (b, _) in pairs.items()}
    after = {k: c for k, (_, c) in pairs.items()}
    lost, gained = goal_changes(pairs)
    lines += [
        "",
        f"logs compared: {len(logs)}"
        + "".join(
            f"; only in the {name} run: {', '.join(sorted(only))}"
            for name, only in (
                ("base", set(base) - set(candidate)),
                ("candidate", set(candidate) - set(base)),
            )
            if only
        ),
        f"all four replay goals: {_count([f.replay_met for f in before.values()])} "
        f"-> {_count([f.replay_met for f in after.values()])} pairs",
        f"ECE <= {ECE_GOAL}: {_count([f.calibrated for f in before.values()])} -> "
        f"{_count([f.calibrated for f in after.values()])} pairs; worst "
        f"{_worst_ece(before)} -> {_worst_ece(after)}",
        f"lead lower on {sum(_lower(b.lead, c.lead) for b, c in pairs.values())} "
        f"of {sum(_both(b.lead, c.lead) for b, c in pairs.values())} pairs",
        f"goals lost ({len(lost)}): " + ("; ".join(lost) or "none"),
        f"goals gained ({len(gained)}): " + ("; ".join(gained) or "none"),
    ]
    return lines, lost


def _both(before: float | None, after: float | None) -> bool:
    return before is not None and after is not None


def _lower(before: float | None, after: float | None) -> bool:
    return (
        before is not None and after is not None and round(after, 3) < round(before, 3)
    )


def main(argv: list[str] | None = None) -> int:
    """Print the comparison; exit 1 when the candidate loses a goal anywhere."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="the base run's benchmarks folder")
    parser.add_argument(
        "candidate", type=Path, help="the candidate run's benchmarks folder"
    )
    args = parser.parse_args(argv)
    try:
        lines, lost = compare(load_runs(args.base), load_runs(args.candidate))
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    print("\n".join(lines))
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
