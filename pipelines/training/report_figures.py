"""The training report's figures: matplotlib figures from the evaluations.

Drawn with the Agg canvas through matplotlib's object API (no pyplot, hence no
global figure registry and no display); :func:`save_png` renders and releases one.
:mod:`pipelines.training.report` places them in the Markdown page.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from panda_predictor.core.assess.calibration_error import (
    expected_calibration_error,
    reliability_table,
)
from panda_predictor.core.assess.evaluation import TargetEvaluation
from panda_predictor.core.decide.tail_rule import CoverageCurve


def save_png(fig: Figure, path: Path) -> None:
    """Render ``fig`` to PNG with the Agg canvas and drop its contents."""
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=90)
    fig.clear()


def plot_confusion(ev: TargetEvaluation, model: str) -> Figure:
    """Draw a confusion matrix: colour = share of the true class, text = count."""
    cm = ev.confusion
    shares = cm / np.maximum(cm.sum(axis=1, keepdims=True), 1)
    size = 2.2 + 0.55 * ev.n_classes
    fig = Figure(figsize=(size + 0.8, size))
    ax = fig.add_subplot()
    image = ax.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=ax, label="share of true class")
    for (i, j), count in np.ndenumerate(cm):
        ax.text(
            j,
            i,
            str(count),
            ha="center",
            va="center",
            color="white" if shares[i, j] > 0.6 else "black",
            fontsize=8,
        )
    ticks = range(ev.n_classes)
    ax.set_xticks(ticks, ev.class_names, rotation=45, ha="right", fontsize=7)
    ax.set_yticks(ticks, ev.class_names, fontsize=7)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    ax.set_title(f"{ev.target} - {model}", fontsize=9)
    fig.tight_layout()
    return fig


def plot_recall_bars(evs: Mapping[str, TargetEvaluation], target: str) -> Figure:
    """Draw one target's per-class recall: a bar group per class, a bar per model."""
    first = next(iter(evs.values()))
    x = np.arange(first.n_classes)
    width = 0.8 / max(len(evs), 1)
    fig = Figure(figsize=(1.6 + 0.7 * first.n_classes, 3.2))
    ax = fig.add_subplot()
    for i, (model, ev) in enumerate(evs.items()):
        ax.bar(x + (i - (len(evs) - 1) / 2) * width, ev.recall, width, label=model)
    ax.set_xticks(x, first.class_names, rotation=45, ha="right", fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("recall")
    ax.set_title(f"{target}: recall per class", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_coverage(
    curves: Mapping[str, CoverageCurve],
    ylabel: str = "accuracy on decided tasks (all targets right)",
) -> Figure:
    """Draw accuracy of the decided tasks against coverage, one line per curve."""
    fig = Figure(figsize=(4.8, 3.6))
    ax = fig.add_subplot()
    for model, curve in curves.items():
        ax.plot(curve.coverage, curve.accuracy, marker="o", markersize=3, label=model)
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("coverage (share of tasks decided without scouts)")
    ax.set_ylabel(ylabel)
    ax.set_title("coverage vs accuracy over confidence thresholds", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_reliability(
    target: str, parts: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> Figure:
    """Draw one target's reliability diagram per part, before and after calibration.

    ``parts`` maps a part's name to (served distribution before calibration,
    after, true classes); each panel plots the accuracy of the most likely class
    against its confidence per bin (the diagonal is perfect calibration).
    """
    fig = Figure(figsize=(3.4 * len(parts), 3.4))
    for i, (name, (before, after, y)) in enumerate(parts.items()):
        ax = fig.add_subplot(1, len(parts), i + 1)
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="--")
        for label, proba in (("before", before), ("after", after)):
            table = reliability_table(proba, y)
            keep = table.n > 0
            ece = expected_calibration_error(proba, y)
            ax.plot(
                table.confidence[keep],
                table.accuracy[keep],
                marker="o",
                markersize=3,
                label=f"{label} (ECE {ece:.3f})",
            )
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence of the most likely class")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{target}: {name} part ({len(y)} tasks)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
