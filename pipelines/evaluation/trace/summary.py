"""Write the goal table of docs/evaluation.md from benchmark results (full.json).

One row per log and target, all about the production row (what the hook writes):
its macro-F1 against the best baseline with the day-bootstrap interval, whether a
baseline beats it in under- and over-allocation at once, how many tasks skip their
scouts, the top class's recall and precision beside the key-95th-percentile rule,
and the replay goals against scouts.

A second table (``--table choices``) says what each log chose for itself: which
expert the production row followed how often, what each retraining chose (cadence,
half-life of the training weights, the combination's settings, whether to
serve the early re-measurement) and where the top-class tasks went that the
production row missed.

A hindsight table (``--table hindsight``) puts beside the production row and the
scouts the production row with the scouts kept on the tasks chosen after they ran
(:mod:`pipelines.evaluation.trace.hindsight`): whether a per-task choice could meet
the replay goals with the values written.

A methods table (``--table methods``) scores every calibration method fitted on
the validation parts on all the logs' test parts at once (read after the fact, not
used to choose): per method, the pairs meeting the ECE goal, the median and the
worst ECE.

Run (on the files ``panda-predictor benchmark`` writes)::

    python -m pipelines.evaluation.trace.summary [--table choices|methods|...] \
        <home>/benchmarks/*/full.json

``--update docs/evaluation.md`` rewrites every one of these tables on the page
from the files instead (:func:`updated_doc`). The run the page's tables come from
is kept in ``benchmarks/test-base/``, and a project test checks that the page
still equals what that run gives.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from panda_predictor.core.decide.calibration import DEFAULT_METHOD
from panda_predictor.core.replay.engine import ReplayOutcome
from panda_predictor.core.replay.goals import goal_marks, replay_goals
from panda_predictor.ingest.swf import trace_name

PRODUCTION = "model:production"
OURS = f"predictor ({PRODUCTION})"
#: Rows of the replay table, in order (the peers follow, then the oracle is left
#: out: it is the floor, not a strategy).
REPLAY_ROWS = (
    "scouts",
    OURS,
    "request (never re-measured)",
    "request + PanDA re-measurement",
)


def waste_key(outcome: dict[str, Any]) -> str:
    """Return the waste column a replayed row is judged by: GB-hours where it
    wasted memory, else core-hours."""
    return "wasted_gb_hours" if outcome["wasted_gb_hours"] > 0 else "wasted_core_hours"


@dataclass(frozen=True)
class ProductionReplay:
    """One target's replay of production against the scouts, from full.json."""

    #: :func:`~panda_predictor.core.replay.goals.replay_goals` of production.
    goals: dict[str, Any]
    #: Production's and the scouts' replayed rows.
    ours: dict[str, Any]
    scouts: dict[str, Any]

    @property
    def waste(self) -> str:
        """The waste column both rows are judged by (:func:`waste_key`)."""
        return waste_key(self.scouts)


def production_replay(outcomes: list[dict[str, Any]]) -> ProductionReplay | None:
    """Return production's replay goals against the scouts and both rows, from one
    target's replayed rows in full.json; None where either row is missing."""
    by_name = {o["strategy"]: o for o in outcomes}
    if "scouts" not in by_name or OURS not in by_name:
        return None
    goals = replay_goals([ReplayOutcome(**o) for o in outcomes], OURS)
    return ProductionReplay(goals, by_name[OURS], by_name["scouts"])


def _replay_marks(outcomes: list[dict[str, Any]]) -> str:
    """Return ✓/✗ per replay goal of production vs scouts (core.replay.goals:
    failed jobs, waste, bulk delay, not dominated), then the figures."""
    replay = production_replay(outcomes)
    if replay is None:
        return "n/a"
    ours, scouts, waste = replay.ours, replay.scouts, replay.waste
    figures = (
        f"{ours['failed_job_rate']:.3f}/{scouts['failed_job_rate']:.3f}, "
        f"{ours[waste]:.3g}/{scouts[waste]:.3g}, "
        f"{ours['mean_bulk_delay_hours']:.2f}/{scouts['mean_bulk_delay_hours']:.2f}"
    )
    marks = goal_marks(replay.goals)
    beaten = ", ".join(replay.goals["dominated_by"])
    return marks + f" ({figures})" + (f"; dominated by {beaten}" if beaten else "")


def replay_rows(full: dict[str, Any]) -> list[str]:
    """Return the replay table's rows of one log: scouts, production, the request
    rows and the published peers, per replayed target."""
    rows = []
    name = trace_name(str(full.get("file", "?")))
    for target, outcomes in full.get("replay", {}).items():
        by_name = {o["strategy"]: o for o in outcomes}
        names = [n for n in REPLAY_ROWS if n in by_name] + sorted(
            n for n in by_name if n.startswith("peer (")
        )
        for strategy in names:
            o = by_name[strategy]
            waste = waste_key(by_name.get("scouts", o))
            unit = "GB-h" if waste == "wasted_gb_hours" else "core-h"
            rows.append(
                f"| {name} | {target} | {strategy} | {o['failed_job_rate']:.3f} | "
                f"{o[waste]:.4g} {unit} | {o['mean_bulk_delay_hours']:.2f} |"
            )
    return rows


def calibration_rows(full: dict[str, Any]) -> list[str]:
    """Return the test-part ECE rows of one log: the production distribution's
    (with its interval over resampled test days, where the run recorded one),
    and the uncalibrated one's (``none``), per target."""
    rows = []
    name = trace_name(str(full.get("file", "?")))
    for target, per_name in full.get("calibration", {}).items():
        ours = per_name.get(PRODUCTION, {})
        raw = per_name.get("calibration:none", {})
        if not ours:
            continue
        interval = (
            f"{ours['ece_low']:.3f}-{ours['ece_high']:.3f} ({ours['n_days']:.0f})"
            if "ece_low" in ours
            else "-"
        )
        rows.append(
            f"| {name} | {target} | {ours['ece']:.3f} | {interval} | "
            f"{ours['cumulative_ece']:.3f} | {raw.get('ece', float('nan')):.3f} | "
            f"{ece_verdict(ours['ece'])} |"
        )
    return rows


def hindsight_rows(full: dict[str, Any]) -> list[str]:
    """Return one log's hindsight rows: per target, the production row, the scouts,
    and the production row with the scouts kept on the tasks chosen afterwards
    (:mod:`pipelines.evaluation.trace.hindsight`)."""
    rows = []
    name = trace_name(str(full.get("file", "?")))
    for target, row in full.get("hindsight", {}).items():
        by_name = {o["strategy"]: o for o in full["replay"][target]}
        mine, scouts, kept = by_name[OURS], by_name["scouts"], row["outcome"]
        waste = waste_key(scouts)
        cells = [
            f"{o['failed_job_rate']:.3f} / {o[waste]:.4g} / "
            f"{o['mean_bulk_delay_hours']:.2f}"
            for o in (scouts, mine, kept)
        ]
        marks = goal_marks(row["goals"])
        rows.append(
            f"| {name} | {target} | {' | '.join(cells)} | {row['kept_tasks']} of "
            f"{row['tasks']} | {marks} |"
        )
    return rows


HINDSIGHT_HEADER = (
    "| log | target | scouts: failed / wasted / delay | production | production, "
    "scouts kept with hindsight | tasks kept | goals |\n" + "|---" * 7 + "|"
)

#: The calibration goal: top-label ECE at most this on every log's test part.
ECE_GOAL = 0.05


def ece_verdict(ece: float) -> str:
    """Return "met" or "not met": the calibration goal for a test part's ECE."""
    return "met" if ece <= ECE_GOAL else "not met"


CALIBRATION_HEADER = (
    "| log | target | ECE (top-label) | 90 % interval (days resampled) | "
    "ECE (cumulative) | ECE uncalibrated | ECE <= 0.05 |\n" + "|---" * 7 + "|"
)

METHODS_HEADER = (
    "| method | ECE <= 0.05 | median ECE | worst ECE |\n" + "|---" * 4 + "|"
)


def method_rows(fulls: list[dict[str, Any]]) -> list[str]:
    """Return one row per calibration method over every log and target of
    ``fulls``: the pairs meeting :data:`ECE_GOAL`, the median and the worst ECE.

    The production row is the served distribution's (the calibration table's),
    last, named after the method production serves.
    """
    scores: dict[str, list[tuple[float, str]]] = {}
    for full in fulls:
        name = trace_name(str(full.get("file", "?")))
        for target, per_name in full.get("calibration", {}).items():
            for method, score in per_name.items():
                key = method.removeprefix("calibration:")
                scores.setdefault(key, []).append((score["ece"], f"{name} {target}"))
    production = scores.pop(PRODUCTION, [])
    rows = [_method_row(method, values) for method, values in scores.items()]
    if production:
        rows.append(_method_row(f"**{DEFAULT_METHOD}** (production)", production))
    return rows


def _method_row(method: str, values: list[tuple[float, str]]) -> str:
    eces = [ece for ece, _ in values]
    worst, where = max(values)
    met = sum(ece <= ECE_GOAL for ece in eces)
    return (
        f"| {method} | {met} of {len(eces)} | {statistics.median(eces):.3f} | "
        f"{worst:.3f} ({where}) |"
    )


REPLAY_HEADER = (
    "| log | target | strategy | failed jobs | wasted hours | bulk delay (h/task) |\n"
    + "|---" * 6
    + "|"
)


def summary_rows(full: dict[str, Any]) -> list[str]:
    """Return the Markdown rows of one log's full.json."""
    name = trace_name(full["file"])
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


def _counts(values: list[Any], show=str) -> str:
    """Return ``a x2, b x1`` for the values, most frequent first."""
    return ", ".join(f"{show(v)} x{n}" for v, n in Counter(values).most_common())


def _days(value: float | None) -> str:
    return "all" if value is None else f"{value:g} d"


def early_remeasure_retrainings(choices: dict[str, dict[str, Any]]) -> int:
    """Return how many retrainings served the early re-measurement.

    ``choices`` is ``full.json``'s ``split.self_tuning`` (one entry per
    retraining). The choice is one per retraining, for all its targets, since
    PanDA re-measures a task whole.
    """
    return sum(
        bool((c.get("cost") or {}).get("early_remeasure")) for c in choices.values()
    )


def choice_rows(full: dict[str, Any]) -> list[str]:
    """Return the Markdown rows of what one log chose, per target."""
    name = trace_name(full["file"])
    tuning = full["split"].get("self_tuning", {})
    cadences = _counts([c["retrain_every_days"] for c in tuning.values()], _days)
    early = early_remeasure_retrainings(tuning)
    rows = []
    for target, production in full.get("production", {}).items():
        followed = production.get("followed", {})
        settings = list(production.get("combination", {}).values())
        lives = _counts(
            [c["half_life_days"].get(target) for c in tuning.values()], _days
        )
        tails = production.get("tails", {})
        shares = " | ".join(f"{followed.get(e, 0.0):.0%}" for e in EXPERT_COLUMNS)
        rows.append(
            f"| {name} | {target} | {production.get('coverage', 0.0):.0%} | "
            f"{shares} | {len(tuning) or len(settings)} | {cadences or 'n/a'} | "
            f"{lives or 'n/a'} | "
            f"{_counts([s['decay'] for s in settings])} | "
            f"{_counts([s['key'] for s in settings])} | "
            f"{sum(bool(s['balanced']) for s in settings)} of {len(settings)} | "
            f"{early} of {len(tuning)} | "
            f"{tails.get('missed', float('nan')):.0%}: "
            f"{tails.get('missed_by_model', float('nan')):.0%} / "
            f"{tails.get('missed_by_combination', float('nan')):.0%} / "
            f"{tails.get('written_low', float('nan')):.1%} |"
        )
    return rows


#: The experts of the combination, in the choices table's order.
EXPERT_COLUMNS = ("model", "last2", "key_p75", "key_p95", "ratio")

CHOICES_HEADER = (
    "| log | target | scouts skipped | "
    + " | ".join(EXPERT_COLUMNS)
    + " | retrainings | days to the next retraining | half-life chosen | decay "
    "chosen | key chosen | balanced | early re-measurement | top class missed: by "
    "the model / by the combination / written low |\n" + "|---" * 16 + "|"
)

HEADER = (
    "| log | target | production macro-F1 | best baseline | lead (90 % interval) "
    "| baselines better in under- and over-allocation | quality goal | scouts "
    "skipped | top class recall/precision | key p95 rule | replay vs scouts: failed, "
    "wasted, bulk delay, not dominated |\n" + "|---" * 11 + "|"
)


#: Each table's name (``--table``), its header and its rows of one file (None:
#: the methods table, one row per method over all files at once).
TABLES: dict[str, tuple[str, Callable[[dict[str, Any]], list[str]] | None]] = {
    "goal": (HEADER, summary_rows),
    "choices": (CHOICES_HEADER, choice_rows),
    "replay": (REPLAY_HEADER, replay_rows),
    "calibration": (CALIBRATION_HEADER, calibration_rows),
    "hindsight": (HINDSIGHT_HEADER, hindsight_rows),
    "methods": (METHODS_HEADER, None),
}


def table_text(name: str, documents: list[dict[str, Any]]) -> str:
    """Return table ``name`` (a key of :data:`TABLES`) of the ``documents``
    (full.json files, in the order given), header first, as printed."""
    header, rows_of = TABLES[name]
    if rows_of is None:
        rows = method_rows(documents)
    else:
        rows = [row for full in documents for row in rows_of(full)]
    return "\n".join([header, *rows])


def updated_doc(text: str, documents: list[dict[str, Any]]) -> str:
    """Return ``text`` (a Markdown page, docs/evaluation.md) with every table of
    :data:`TABLES` replaced by the ``documents``' own.

    A table is found by its header's first line and runs to the first line that
    is not a table row. Every table must be on the page exactly once: a missing
    or repeated header raises ``ValueError`` naming it, so a renamed column
    never leaves an old table standing.
    """
    lines = text.split("\n")
    for name in TABLES:
        new = table_text(name, documents).split("\n")
        starts = [i for i, line in enumerate(lines) if line == new[0]]
        if len(starts) != 1:
            raise ValueError(
                f"The page must hold the {name!r} table once, found by its header "
                f"{new[0][:60]!r}... Got it {len(starts)} times instead."
            )
        start = end = starts[0]
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        lines[start:end] = new
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Print one table of the given full.json files, or rewrite a page's tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="full.json files")
    parser.add_argument(
        "--table",
        choices=tuple(TABLES),
        default="goal",
        help="goal: the goal per log and target (default); choices: the experts "
        "followed, the self-tuned choices and the top-class misses; replay: scouts, "
        "production, the request rows and the published peers per log and target; "
        "calibration: the production distribution's test-part ECE; hindsight: "
        "the production row with the scouts kept on the tasks chosen after they "
        "ran, within the delay goal; methods: every calibration method's ECE "
        "over all the files' test parts",
    )
    parser.add_argument(
        "--update",
        type=Path,
        metavar="PAGE",
        help="instead of printing one table, rewrite every table of PAGE "
        "(docs/evaluation.md) from the files, in place, taken in the order of "
        "their paths (not the shell's, which depends on its locale)",
    )
    args = parser.parse_args(argv)
    if args.update is not None:
        args.files = sorted(args.files)
    documents = [json.loads(path.read_text()) for path in args.files]
    if args.update is not None:
        page = args.update.read_text()
        try:
            updated = updated_doc(page, documents)
        except ValueError as exc:
            parser.error(f"{args.update}: {exc}")
        args.update.write_text(updated)
        what = "unchanged" if updated == page else "tables rewritten"
        print(f"{args.update}: {what}")
        return
    print(table_text(args.table, documents))


if __name__ == "__main__":
    main()
