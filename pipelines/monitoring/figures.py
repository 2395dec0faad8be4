"""The monitoring report's figures: pure functions from frames to PNG files.

Each function draws one figure with matplotlib's Agg backend (no display), saves it
next to the page and returns the file name. The numbers behind the calibration and
coverage curves come from :func:`calibration_table` and :func:`coverage_table`, so the
tests check the figures' data without reading pixels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from panda_predictor.core.bins import TargetBins  # noqa: E402
from panda_predictor.core.domain.targets import TARGET_NAMES  # noqa: E402

#: Verdict of a drift run -> colour of its marker.
VERDICT_COLOURS = {"drift": "#b00", "no_drift": "#070", "too_few_outcomes": "#999"}


def save(fig: Any, folder: Path, name: str) -> str:
    """Save ``fig`` as ``folder/name`` (tight layout, 80 dpi), close it, return name."""
    fig.tight_layout()
    fig.savefig(folder / name, dpi=80)
    plt.close(fig)
    return name


def _scored(frame: pd.DataFrame, target: str) -> pd.DataFrame:
    """Return confidence and correctness of the rows where everything is known."""
    conf_col = f"{target}_confidence"
    if frame.empty or conf_col not in frame:
        return pd.DataFrame({"confidence": [], "correct": []})
    pred = pd.to_numeric(frame[f"{target}_pred_class"], errors="coerce")
    true = pd.to_numeric(frame[f"{target}_true_class"], errors="coerce")
    conf = pd.to_numeric(frame[conf_col], errors="coerce")
    known = (pred >= 0) & (true >= 0) & conf.notna()
    return pd.DataFrame(
        {
            "confidence": conf[known].to_numpy(float),
            "correct": (pred[known] == true[known]).to_numpy(bool),
        }
    )


def calibration_table(
    frame: pd.DataFrame, target: str, n_bins: int = 10
) -> pd.DataFrame:
    """Return, per confidence bin of ``target``: tasks, mean confidence, accuracy.

    ``frame`` holds outcome rows with ``<target>_confidence`` joined from the audit.
    A well calibrated model has accuracy close to its mean confidence in every bin.
    Empty bins are left out.
    """
    scored = _scored(frame, target)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    index = np.clip(np.digitize(scored["confidence"], edges[1:-1]), 0, n_bins - 1)
    grouped = scored.assign(bin=index).groupby("bin")
    table = pd.DataFrame(
        {
            "tasks": grouped.size(),
            "mean_confidence": grouped["confidence"].mean(),
            "accuracy": grouped["correct"].mean(),
        }
    ).reset_index()
    table["low"] = edges[table["bin"]]
    table["high"] = edges[table["bin"] + 1]
    return table[["low", "high", "tasks", "mean_confidence", "accuracy"]]


def coverage_table(
    frame: pd.DataFrame, target: str, thresholds: Sequence[float] | None = None
) -> pd.DataFrame:
    """Return, per confidence threshold: share of tasks at or above it, their accuracy.

    The share is what the hook would apply (skip scouts for) if ``target`` alone
    decided; the accuracy is how often those tasks got the right class.
    """
    scored = _scored(frame, target)
    steps = np.linspace(0.0, 0.95, 20) if thresholds is None else thresholds
    rows = []
    for t in steps:
        kept = scored[scored["confidence"] >= t]
        rows.append(
            {
                "threshold": float(t),
                "coverage": len(kept) / len(scored) if len(scored) else math.nan,
                "accuracy": float(kept["correct"].mean()) if len(kept) else math.nan,
                "tasks": len(kept),
            }
        )
    return pd.DataFrame(rows)


def calibration_figure(folder: Path, frame: pd.DataFrame) -> str:
    """Draw observed accuracy against predicted confidence, one panel per target."""
    fig, axes = plt.subplots(1, len(TARGET_NAMES), figsize=(13, 3.4), sharey=True)
    for ax, target in zip(axes, TARGET_NAMES, strict=True):
        table = calibration_table(frame, target)
        ax.plot([0, 1], [0, 1], color="#999", linestyle="--", linewidth=1)
        ax.plot(table["mean_confidence"], table["accuracy"], marker="o")
        for row in table.itertuples():
            ax.annotate(
                str(row.tasks),
                (row.mean_confidence, row.accuracy),
                textcoords="offset points",
                xytext=(0, 5),
                ha="center",
                fontsize=7,
            )
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.08)
        ax.set_title(target)
        ax.set_xlabel("predicted confidence")
    axes[0].set_ylabel("observed accuracy")
    return save(fig, folder, "calibration.png")


def coverage_figure(folder: Path, frame: pd.DataFrame, threshold: float) -> str:
    """Draw coverage and accuracy against the confidence threshold, per target."""
    fig, axes = plt.subplots(1, len(TARGET_NAMES), figsize=(13, 3.4), sharey=True)
    for ax, target in zip(axes, TARGET_NAMES, strict=True):
        table = coverage_table(frame, target)
        ax.plot(table["threshold"], table["coverage"], marker=".", label="coverage")
        ax.plot(table["threshold"], table["accuracy"], marker=".", label="accuracy")
        ax.axvline(threshold, color="k", linestyle=":", linewidth=1)
        ax.set_ylim(0, 1.05)
        ax.set_title(target)
        ax.set_xlabel("confidence threshold")
    axes[0].legend(loc="lower left", fontsize=8)
    return save(fig, folder, "coverage_accuracy.png")


def class_names(bins: TargetBins) -> list[str]:
    """Return a readable name per class: its label and range, e.g. ``low (<1500)``."""
    names = []
    for cls, label in enumerate(bins.labels):
        low, high = bins.range_of(cls)
        if math.isinf(low):
            span = f"<{high:g}"
        elif math.isinf(high):
            span = f"≥{low:g}"
        else:
            span = f"{low:g}–{high:g}"
        names.append(span if label == span.strip("<≥") else f"{label}\n({span})")
    return names


def confusion_matrix(pred: np.ndarray, true: np.ndarray, n_classes: int) -> np.ndarray:
    """Return counts of (true, predicted) classes; unknown (-1) rows are left out."""
    known = (pred >= 0) & (true >= 0) & (pred < n_classes) & (true < n_classes)
    matrix = np.zeros((n_classes, n_classes), dtype=int)
    np.add.at(matrix, (true[known].astype(int), pred[known].astype(int)), 1)
    return matrix


def draw_confusion(ax: Any, matrix: np.ndarray, names: Sequence[str]) -> None:
    """Draw ``matrix`` on ``ax``: a tick per class at its cell, counts in cells.

    The count is white on cells darker than half the largest count and black on
    the others, so it stays readable on the colour map.
    """
    top = max(1, int(matrix.max()))
    ax.imshow(matrix, cmap="Blues", vmin=0, vmax=top)
    for (i, j), v in np.ndenumerate(matrix):
        ax.text(
            j,
            i,
            str(v),
            ha="center",
            va="center",
            fontsize=8,
            color="white" if v > top / 2 else "black",
        )
    ticks = np.arange(len(names))
    ax.set_xticks(ticks, names, fontsize=7, rotation=45, ha="right")
    ax.set_yticks(ticks, names, fontsize=7)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")


def confusion_figure(
    folder: Path, outcomes: pd.DataFrame, bins: Mapping[str, TargetBins]
) -> str:
    """Draw each target's confusion matrix over all its classes, named by bin."""
    fig, axes = plt.subplots(1, len(TARGET_NAMES), figsize=(15, 4.2))
    for ax, target in zip(axes, TARGET_NAMES, strict=True):
        names = class_names(bins[target])
        matrix = confusion_matrix(
            outcomes[f"{target}_pred_class"].to_numpy(dtype=float),
            outcomes[f"{target}_true_class"].to_numpy(dtype=float),
            len(names),
        )
        draw_confusion(ax, matrix, names)
        ax.set_title(f"{target} ({bins[target].unit})")
    return save(fig, folder, "confusion.png")


def champion_challenger_figure(folder: Path, rows: Sequence[Mapping[str, Any]]) -> str:
    """Draw challenger and champion bars per metric (rows: metric, both values)."""
    names = [str(r["metric"]) for r in rows]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(names) + 2), 3.8))

    def values(key: str) -> list[float]:
        return [math.nan if r.get(key) is None else float(r[key]) for r in rows]

    ax.bar(x - 0.2, values("challenger"), 0.4, label="challenger")
    ax.bar(x + 0.2, values("champion"), 0.4, label="champion")
    ax.set_xticks(x, names, rotation=60, ha="right", fontsize=7)
    ax.legend()
    ax.set_title("gate metrics on the same test tasks")
    return save(fig, folder, "champion_challenger.png")


def drift_trend_figure(folder: Path, runs: Sequence[Mapping[str, Any]]) -> str:
    """Draw PSI per feature over drift runs with its threshold; colour the verdicts.

    One small panel per feature: the PSI line, its alarm threshold dashed, and each
    run's marker coloured by that run's verdict (red drift, green none, grey too
    few outcomes). A filled marker is a run where that feature raised the alarm.
    """
    ordered = sorted(runs, key=lambda r: r["run_at"])
    features = sorted({name for r in ordered for name in r.get("features", {})})
    ncols = min(3, max(1, len(features)))
    nrows = max(1, math.ceil(len(features) / ncols))
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4.4 * ncols, 2.6 * nrows), squeeze=False
    )
    times = [r["run_at"] for r in ordered]
    for ax, name in zip(axes.flat, features, strict=False):
        psi = [r["features"].get(name, {}).get("psi", math.nan) for r in ordered]
        limit = [
            r["features"].get(name, {}).get("threshold", math.nan) for r in ordered
        ]
        ax.plot(times, psi, color="#48c", linewidth=1)
        ax.plot(times, limit, color="k", linestyle="--", linewidth=1)
        for when, value, run in zip(times, psi, ordered, strict=True):
            alarm = run["features"].get(name, {}).get("alarm", False)
            colour = VERDICT_COLOURS.get(run["verdict"], "#999")
            ax.scatter(
                [when],
                [value],
                color=colour if alarm else "white",
                edgecolors=colour,
                zorder=3,
            )
        ax.set_title(name, fontsize=9)
        ax.tick_params(axis="x", rotation=30, labelsize=7)
    for ax in list(axes.flat)[len(features) :]:
        ax.axis("off")
    return save(fig, folder, "drift_trend.png")


def over_time_figures(folder: Path, weekly: pd.DataFrame) -> list[str]:
    """Draw accuracy and under-allocation per target and week, and no-scout share."""
    names = []
    for metric in ("accuracy", "under_allocation"):
        fig, ax = plt.subplots(figsize=(10, 3.5))
        for target, part in weekly.groupby("target"):
            ax.plot(part["week"], part[metric], marker="o", label=target)
        ax.set_title(f"feedback {metric.replace('_', '-')} per ISO week")
        ax.tick_params(axis="x", rotation=60, labelsize=7)
        ax.legend()
        names.append(save(fig, folder, f"{metric}_over_time.png"))
    weeks = weekly.drop_duplicates("week")
    fig, ax = plt.subplots(figsize=(10, 3))
    ax.bar(weeks["week"], weeks["no_scout_share"])
    ax.set_ylim(0, 1)
    ax.set_title("share of tasks decided without scouts")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    names.append(save(fig, folder, "coverage.png"))
    return names


def drift_snapshot_figure(folder: Path, drift: Mapping[str, Any]) -> str:
    """Draw the last drift check's PSI per feature (red: the feature drifted)."""
    feats = drift.get("features", [])
    fig, ax = plt.subplots(figsize=(10, 3.5))
    ax.bar(
        [f["feature"] for f in feats],
        [f["psi"] for f in feats],
        color=["#b00" if f["drifted"] else "#48c" for f in feats],
    )
    ax.axhline(0.2, color="k", linestyle="--", linewidth=1)
    ax.set_title("PSI per feature (recent tasks vs champion's reference)")
    ax.tick_params(axis="x", rotation=30)
    return save(fig, folder, "drift.png")
