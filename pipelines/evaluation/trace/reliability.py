"""One reliability figure of the trace benchmarks: is the served confidence right?

For every log and target of the given ``full.json`` outputs, a panel with the test
part's top-label reliability bins (the 15 equal-width bins of the ECE in
``summary --table calibration``): the accuracy of the most likely class against
its mean confidence per bin, for the distribution production served (calibrated on
the retraining's validation part) and for the same distribution before calibration.
A point on the diagonal is a bin whose stated probability came true as often as it
said; a marker's area is its bin's share of the jobs, so the eye weighs the bins
the way the ECE does. Each panel's title gives the served ECE, its 90 % interval
over resampled test days and the number of those days, and says whether the goal
(ECE at most 0.05) is met. One figure for all logs, so the misses stand out among
the rest. Drawn with matplotlib's object API on the Agg canvas.

    python -m pipelines.evaluation.trace.reliability BENCHMARKS/*/full.json \
        -o docs/img/reliability.png
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from panda_predictor.errors import UserInputError
from pipelines.evaluation.trace.full_json import (
    figure_parser,
    log_name,
    read_full_json,
)
from pipelines.evaluation.trace.scoring import RELIABILITY_OF, interval_text
from pipelines.evaluation.trace.summary import ECE_GOAL, ece_verdict
from pipelines.evaluation.trace.target_run import PRODUCTION

#: Colour, marker and legend label of each distribution drawn.
_STYLES = {
    PRODUCTION: ("tab:blue", "o", "served (calibrated)"),
    "calibration:none": ("tab:grey", "s", "before calibration"),
}
#: Panels per row of the figure.
COLUMNS = 4
#: Area in points² of a marker whose bin holds every test job.
_FULL_AREA = 900.0


def panels(documents: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Return one panel per log and target that has reliability bins.

    Each panel: ``title`` (log and target), ``bins`` (per distribution name, the
    full.json columns) and ``score`` (the production ECE with its interval, from
    the same file's ``calibration``; empty where the file has none).
    """
    out = []
    for name, full in documents:
        for target, bins in full.get("reliability", {}).items():
            if not bins:
                continue
            score = full.get("calibration", {}).get(target, {}).get(PRODUCTION, {})
            out.append({"title": f"{name}\n{target}", "bins": bins, "score": score})
    return out


def score_text(score: dict[str, Any]) -> str:
    """Return "ECE 0.061 (0.048-0.093 over 2 days): not met", or "" without an ECE."""
    if not _has_ece(score):
        return ""
    ece = float(score["ece"])
    return f"ECE {ece:.3f}{interval_text(score)}: {ece_verdict(ece)}"


def _has_ece(score: dict[str, Any]) -> bool:
    """Return whether ``score`` holds a finite ECE (an empty test part has NaN)."""
    return score.get("ece") is not None and math.isfinite(float(score["ece"]))


def _points(bins: dict[str, list]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the non-empty bins' confidence, accuracy and share of the jobs."""
    confidence = np.array(bins["confidence"], dtype=float)  # None -> NaN
    accuracy = np.array(bins["accuracy"], dtype=float)
    share = np.array(bins["count"], dtype=float)
    keep = np.isfinite(confidence) & np.isfinite(accuracy) & (share > 0)
    return confidence[keep], accuracy[keep], share[keep]


def _panel(ax: Any, panel: dict[str, Any]) -> None:
    """Draw one log and target: the diagonal and each distribution's bins."""
    ax.plot([0, 1], [0, 1], color="black", linewidth=0.7, linestyle="--")
    for name in RELIABILITY_OF:
        bins = panel["bins"].get(name)
        if bins is None:
            continue
        colour, marker, label = _STYLES[name]
        x, y, share = _points(bins)
        ax.plot(x, y, color=colour, linewidth=0.8, alpha=0.6)
        ax.scatter(
            x,
            y,
            s=np.maximum(share * _FULL_AREA, 6.0),
            color=colour,
            marker=marker,
            alpha=0.75,
            edgecolors="white",
            linewidths=0.5,
            label=label,
        )
    score = panel["score"]
    text = score_text(score)
    missed = _has_ece(score) and float(score["ece"]) > ECE_GOAL
    ax.set_title(
        panel["title"] + (f"\n{text}" if text else ""),
        fontsize=8,
        color="tab:red" if missed else "black",
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)


def draw(documents: list[tuple[str, dict[str, Any]]], path: Path) -> Path:
    """Draw every log's and target's reliability panel into one PNG at ``path``."""
    shown = panels(documents)
    if not shown:
        raise UserInputError(
            "The FULL_JSON files must hold reliability bins (their 'reliability' "
            "field, written by 'panda-predictor benchmark' since 2026-12-05). Got "
            "none instead: re-run the benchmark of these logs."
        )
    rows = math.ceil(len(shown) / COLUMNS)
    columns = min(COLUMNS, len(shown))
    fig = Figure(figsize=(3.3 * columns, 3.6 * rows + 0.8))
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(shown):
            ax.set_axis_off()
            continue
        _panel(ax, shown[k])
        if k % columns == 0:
            ax.set_ylabel("accuracy of the most likely class", fontsize=7)
        if k >= len(shown) - columns:
            ax.set_xlabel("its stated probability (bin mean)", fontsize=7)
    axes.flat[0].legend(loc="upper left", fontsize=7, markerscale=0.5)
    fig.suptitle(
        "Test parts: is the served confidence right as often as it says?\n"
        "Dashed diagonal: perfectly calibrated; marker area: the bin's share of "
        f"the test jobs; red titles: ECE above {ECE_GOAL}",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    return path


def main(argv: list[str] | None = None) -> int:
    """Write the reliability figure of the full.json files on the command line."""
    parser = figure_parser(
        "pipelines.evaluation.trace.reliability",
        __doc__,
        "PNG",
        "the figure to write (one panel per log and target)",
        "docs/img/reliability.png",
    )
    args = parser.parse_args(argv)
    try:
        documents = []
        for source in args.full_json:
            full = read_full_json(source)
            if not any(full.get("reliability", {}).values()):
                print(f"{source}: no reliability bins, no panel", file=sys.stderr)
                continue
            documents.append((log_name(full, source), full))
        print(draw(documents, args.out))
    except UserInputError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
