"""Write the goal table of docs/evaluation.md from benchmark results (full.json).

One row per log and target, all about the production row (what the hook writes):
its macro-F1 against the best baseline with the day-bootstrap interval, whether a
baseline beats it in under- and over-allocation at once, how many tasks skip their
scouts, the top class's recall and precision beside the key-95th-percentile rule,
and the replay goals against scouts.

Run: ``python -m pipelines.trace.summary <home>/benchmarks/*/full.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

PRODUCTION = "model:production"
#: Replay goals, in the table's order: failed jobs, waste, bulk delay vs scouts.
BULK_DELAY_SHARE = 0.20


def _replay_marks(outcomes: list[dict[str, Any]]) -> str:
    """Return ✓/✗ for failed jobs, waste and bulk delay of production vs scouts."""
    by_name = {o["strategy"]: o for o in outcomes}
    scouts = by_name.get("scouts")
    ours = by_name.get(f"predictor ({PRODUCTION})")
    if scouts is None or ours is None:
        return "n/a"
    waste = "wasted_gb_hours" if scouts["wasted_gb_hours"] > 0 else "wasted_core_hours"
    marks = [
        ours["failed_job_rate"] <= scouts["failed_job_rate"],
        ours[waste] <= scouts[waste],
        ours["mean_bulk_delay_hours"]
        <= BULK_DELAY_SHARE * scouts["mean_bulk_delay_hours"],
    ]
    figures = (
        f"{ours['failed_job_rate']:.3f}/{scouts['failed_job_rate']:.3f}, "
        f"{ours[waste]:.3g}/{scouts[waste]:.3g}, "
        f"{ours['mean_bulk_delay_hours']:.2f}/{scouts['mean_bulk_delay_hours']:.2f}"
    )
    return "".join("✓" if m else "✗" for m in marks) + f" ({figures})"


def summary_rows(full: dict[str, Any]) -> list[str]:
    """Return the Markdown rows of one log's full.json."""
    name = full["file"].removesuffix(".gz").removesuffix(".swf")
    rows = []
    for target, scores in full["full_scores"].items():
        ours = scores.get(PRODUCTION)
        if ours is None:
            continue
        lead = full.get("macro_f1_lead", {}).get(target, {})
        goal = full.get("goal", {}).get(target, {})
        dominated = goal.get("rows", {}).get(PRODUCTION, {}).get("dominated_by", [])
        p95 = scores.get("baseline:key_p95", {})
        production = full.get("production", {}).get(target, {})
        met = goal.get("macro_f1_met") and lead.get("low", -1) > 0 and not dominated
        best = lead.get("baseline", "")
        nan = float("nan")
        best_f1 = scores.get(best, {}).get("macro_f1", nan)
        interval = f"{lead.get('low', nan):+.3f}..{lead.get('high', nan):+.3f}"
        rows.append(
            f"| {name} | {target} | {ours['macro_f1']:.3f} | "
            f"{best.removeprefix('baseline:')} {best_f1:.3f}"
            f" | {lead.get('margin', nan):+.3f} ({interval})"
            f" | {', '.join(d.removeprefix('baseline:') for d in dominated) or 'none'}"
            f" | {'**met**' if met else '**not met**'}"
            f" | {production.get('coverage', 0.0):.0%}"
            f" | {ours['top_class_recall']:.2f}/{ours['top_class_precision']:.2f}"
            f" | {p95.get('top_class_recall', nan):.2f}/"
            f"{p95.get('top_class_precision', nan):.2f}"
            f" | {_replay_marks(full.get('replay', {}).get(target, []))} |"
        )
    return rows


HEADER = (
    "| log | target | production macro-F1 | best baseline | lead (90 % interval) "
    "| baselines better in under- and over-allocation | quality goal | scouts "
    "skipped | top class recall/precision | key p95 rule | replay: failed, wasted, "
    "bulk delay vs scouts |\n" + "|---" * 11 + "|"
)


def main(argv: list[str] | None = None) -> None:
    """Print the goal table of the given full.json files."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="full.json files")
    args = parser.parse_args(argv)
    print(HEADER)
    for path in args.files:
        for row in summary_rows(json.loads(path.read_text())):
            print(row)


if __name__ == "__main__":
    main()
