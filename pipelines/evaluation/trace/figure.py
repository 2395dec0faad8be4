"""One picture of the trace benchmarks: the production row against the best baseline.

For every file and target of the given ``full.json`` outputs, a marker for the
production row (what the hook writes) and for the model alone, and a bar for the
best baseline (by macro-F1), with the day-block bootstrap interval of the
production row's lead drawn around its marker. Left: macro-F1 (the
goal's first half); right: under-allocation rate (the failures a row would cause).
Drawn with matplotlib's object API on the Agg canvas (no display, no pyplot).

    python -m pipelines.evaluation.trace.figure BENCHMARKS/*/full.json \
        -o docs/img/traces.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

#: Marker and colour per model row: what the hook writes, and the model alone.
_STYLES = {
    "model:production": ("o", "tab:blue", "production (what the hook writes)"),
    "model:xgboost": ("x", "tab:orange", "model alone"),
}


def _rows(documents: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], Any]]:
    """Return (label, scores per name, lead) per file and target."""
    out = []
    for doc in documents:
        short = "-".join(doc["file"].split("-")[:2]).replace(".swf.gz", "")
        for target, scores in doc["full_scores"].items():
            lead = doc.get("macro_f1_lead", {}).get(target)
            out.append((f"{short}\n{target}", scores, lead))
    return out


def draw(documents: list[dict[str, Any]], path: Path) -> Path:
    """Draw the figure of ``documents`` (parsed full.json files) into ``path``."""
    rows = _rows(documents)
    if not rows:
        raise ValueError(
            "The 'documents' field must hold at least one target. Got none."
        )
    fig = Figure(figsize=(11, 0.55 * len(rows) + 1.5))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, metric, title in zip(
        axes,
        ("macro_f1", "under_allocation"),
        ("macro-F1 (higher is better)", "under-allocation rate (lower is better)"),
        strict=True,
    ):
        for y, (_, scores, lead) in enumerate(rows):
            baselines = [n for n in scores if n.startswith("baseline:")]
            best = max(baselines, key=lambda n: scores[n]["macro_f1"])
            ax.barh(y, scores[best][metric], color="lightgrey", height=0.6)
            for name, (marker, colour, _) in _STYLES.items():
                if name in scores:
                    ax.plot(scores[name][metric], y, marker, color=colour, ms=6)
            if metric == "macro_f1" and lead is not None:
                base = scores[lead["baseline"]]["macro_f1"]
                ax.plot(
                    [base + lead["low"], base + lead["high"]], [y, y], color="black"
                )
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(rows)), [label for label, _, _ in rows], fontsize=8)
    axes[0].invert_yaxis()
    handles = [axes[0].plot([], [], m, color=c)[0] for m, c, _ in _STYLES.values()]
    labels = [label for _, _, label in _STYLES.values()]
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.suptitle(
        "Real job logs, test part: the production predictor vs the best baseline by "
        "macro-F1 (grey bar); black line: 90 % day-bootstrap interval of the lead",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def main(argv: list[str] | None = None) -> int:
    """Draw the figure from full.json files given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("full_json", nargs="+", type=Path, help="benchmark full.json")
    parser.add_argument("-o", "--out", type=Path, required=True, help="PNG to write")
    args = parser.parse_args(argv)
    documents = [json.loads(p.read_text()) for p in args.full_json]
    print(draw(documents, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
