"""Static HTML pages with PNG plots: the monitoring report and the retrain summary.

No server, no JavaScript: one ``index.html`` (or ``summary.html``) next to its PNG
files, readable in any browser or attached to a ticket. Figures are drawn with
matplotlib's Agg backend so no display is needed.
"""

from __future__ import annotations

import html
import json
import logging
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
log = logging.getLogger(__name__)
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from panda_predictor.core.targets import TARGET_NAMES  # noqa: E402

_STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#eee}img{max-width:100%;border:1px solid #ddd}
.bad{color:#b00;font-weight:bold}.ok{color:#070;font-weight:bold}"""


def _save(fig: Any, folder: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(folder / name, dpi=80)
    plt.close(fig)
    return name


def _img(name: str, alt: str) -> str:
    return f'<img src="{html.escape(name)}" alt="{html.escape(alt)}">'


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.4g}"
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(r.get(c, ''))}</td>" for c in columns) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _page(title: str, sections: Sequence[str]) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{html.escape(title)}</h1><p>Generated {stamp}.</p>"
        + "\n".join(sections)
        + "</body></html>\n"
    )


def _metric_bars(
    folder: Path, challenger: Mapping[str, float], champion: Mapping[str, float] | None
) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    x = np.arange(len(TARGET_NAMES))
    for ax, metric in zip(axes, ("accuracy", "under_allocation"), strict=True):
        new = [challenger.get(f"{t}.{metric}", np.nan) for t in TARGET_NAMES]
        ax.bar(x - 0.2, new, 0.4, label="challenger")
        if champion:
            old = [champion.get(f"{t}.{metric}", np.nan) for t in TARGET_NAMES]
            ax.bar(x + 0.2, old, 0.4, label="champion")
        ax.set_xticks(x, TARGET_NAMES)
        ax.set_title(metric.replace("_", "-"))
        ax.legend()
    return _save(fig, folder, "comparison.png")


def write_retrain_summary(folder: Path, outcome: Any) -> Path:
    """Write ``summary.html`` of a retraining run: decision, metrics side by side."""
    folder.mkdir(parents=True, exist_ok=True)
    new, old = outcome.challenger_metrics, outcome.champion_metrics
    rows = []
    for t in TARGET_NAMES:
        for m in ("accuracy", "macro_f1", "tail_recall", "under_allocation"):
            key = f"{t}.{m}"
            rows.append(
                {
                    "metric": key,
                    "challenger": new.get(key, np.nan),
                    "champion": (old or {}).get(key, np.nan),
                }
            )
    rows.append(
        {
            "metric": "mean_accuracy",
            "challenger": new.get("mean_accuracy", np.nan),
            "champion": (old or {}).get("mean_accuracy", np.nan),
        }
    )
    css = "ok" if outcome.status == "promoted" else "bad"
    sections = [
        f'<p>Decision: <span class="{css}">{html.escape(outcome.status)}</span> '
        f"&mdash; {html.escape(outcome.reason)}</p>",
        f"<p>History window {outcome.since:%Y-%m-%d} .. {outcome.until:%Y-%m-%d}; "
        f"new version {outcome.version}; champion before: "
        f"{outcome.champion_version}; fingerprint {outcome.fingerprint}.</p>",
        "<h2>Same newest test tasks: challenger vs champion</h2>",
        _img(_metric_bars(folder, new, old), "challenger vs champion"),
        _table(rows, ["metric", "challenger", "champion"]),
    ]
    path = folder / "summary.html"
    path.write_text(_page("panda-predictor retraining summary", sections))
    return path


def _over_time(folder: Path, weekly: pd.DataFrame) -> list[str]:
    out = []
    for metric in ("accuracy", "under_allocation"):
        fig, ax = plt.subplots(figsize=(10, 3.5))
        for target, part in weekly.groupby("target"):
            ax.plot(part["week"], part[metric], marker="o", label=target)
        ax.set_title(f"feedback {metric.replace('_', '-')} per ISO week")
        ax.tick_params(axis="x", rotation=60, labelsize=7)
        ax.legend()
        out.append(_img(_save(fig, folder, f"{metric}_over_time.png"), metric))
    weeks = weekly.drop_duplicates("week")
    fig, ax = plt.subplots(figsize=(10, 3))
    ax.bar(weeks["week"], weeks["no_scout_share"])
    ax.set_ylim(0, 1)
    ax.set_title("share of tasks decided without scouts")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    out.append(_img(_save(fig, folder, "coverage.png"), "coverage without scouts"))
    return out


def _drift_plot(folder: Path, drift: Mapping[str, Any]) -> str:
    feats = drift.get("features", [])
    fig, ax = plt.subplots(figsize=(10, 3.5))
    names = [f["feature"] for f in feats]
    ax.bar(
        names,
        [f["psi"] for f in feats],
        color=["#b00" if f["drifted"] else "#48c" for f in feats],
    )
    ax.axhline(0.2, color="k", linestyle="--", linewidth=1)
    ax.set_title("PSI per feature (recent tasks vs champion's reference)")
    ax.tick_params(axis="x", rotation=30)
    return _img(_save(fig, folder, "drift.png"), "drift per feature")


def _confusions(folder: Path, outcomes: pd.DataFrame) -> str:
    fig, axes = plt.subplots(1, len(TARGET_NAMES), figsize=(12, 3.2))
    for ax, t in zip(axes, TARGET_NAMES, strict=True):
        pred = outcomes[f"{t}_pred_class"].to_numpy(dtype=float)
        true = outcomes[f"{t}_true_class"].to_numpy(dtype=float)
        known = (pred >= 0) & (true >= 0)
        n = int(max(pred[known].max(initial=0), true[known].max(initial=0))) + 1
        matrix = np.zeros((n, n))
        np.add.at(matrix, (true[known].astype(int), pred[known].astype(int)), 1)
        ax.imshow(matrix, cmap="Blues")
        for (i, j), v in np.ndenumerate(matrix):
            ax.text(j, i, int(v), ha="center", va="center", fontsize=7)
        ax.set_title(t)
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
    return _img(_save(fig, folder, "confusion.png"), "confusion matrices")


def latest_drift(home: Path) -> dict[str, Any] | None:
    """Return the newest drift check JSON under ``<home>/monitoring``, if any."""
    files = sorted((home / "monitoring").glob("drift-*.json"))
    return json.loads(files[-1].read_text()) if files else None


def write_monitoring_report(
    folder: Path,
    outcomes: pd.DataFrame,
    weekly: pd.DataFrame,
    drift: Mapping[str, Any] | None,
    decisions: Sequence[Mapping[str, Any]],
    champion_version: int | None,
) -> Path:
    """Write ``index.html``: feedback over time, drift, coverage, confusions, decisions.

    Parameters
    ----------
    folder:
        Output folder (created); PNGs go next to the page.
    outcomes, weekly:
        Outcome rows and their :func:`~panda_predictor.core.feedback.weekly_summary`.
    drift:
        The last drift check (see :func:`latest_drift`), or None.
    decisions:
        Last retraining decisions (see :func:`pipelines.retrain_log.read_decisions`).
    champion_version:
        Version whose confusion matrices are drawn (from its feedback).
    """
    folder.mkdir(parents=True, exist_ok=True)
    sections = ["<h2>Feedback over time</h2>"]
    if weekly.empty:
        sections.append("<p>No feedback yet: run 'panda-predictor feedback'.</p>")
    else:
        sections += _over_time(folder, weekly)
    sections.append("<h2>Drift</h2>")
    if drift is None:
        sections.append("<p>No drift check yet: run 'panda-predictor drift'.</p>")
    else:
        verdict = "drift detected" if drift["drifted"] else "no drift"
        sections.append(
            f'<p class="{"bad" if drift["drifted"] else "ok"}">{verdict}</p><p>'
            f"Window {html.escape(str(drift['since']))} .. "
            f"{html.escape(str(drift['until']))}, {drift['n_tasks']} tasks; "
            + html.escape("; ".join(drift["reasons"]))
            + "</p>"
        )
        sections.append(_drift_plot(folder, drift))
    sections.append(
        f"<h2>Confusion matrices of the champion (version {champion_version})</h2>"
    )
    mine = outcomes
    if champion_version is not None and not outcomes.empty:
        mine = outcomes[outcomes["model_version"] == str(champion_version)]
    if mine.empty:
        sections.append("<p>No feedback for the champion yet.</p>")
    else:
        sections.append(_confusions(folder, mine))
    sections.append("<h2>Last retraining decisions</h2>")
    cols = ["until", "status", "version", "champion_version", "reason"]
    sections.append(
        _table(list(reversed(decisions)), cols)
        if decisions
        else "<p>No retraining yet.</p>"
    )
    path = folder / "index.html"
    path.write_text(_page("panda-predictor monitoring report", sections))
    return path


def render_report(settings: Any, out_dir: Path | None = None) -> Path:
    """Gather feedback, drift, decisions and the champion; write the monitoring page."""
    from model_registry.registry import NoChampionError, champion_version
    from panda_predictor.core.feedback import weekly_summary
    from panda_predictor.db.engine import make_engine
    from panda_predictor.db.outcomes import read_outcomes
    from pipelines.retrain_log import read_decisions

    engine = make_engine(settings)
    try:
        outcomes = read_outcomes(engine, settings)
    finally:
        engine.dispose()
    try:
        champion = champion_version(settings)
    except NoChampionError as exc:  # no store yet: the page says no champion
        log.warning("monitoring report without a champion: %s", exc)
        champion = None
    return write_monitoring_report(
        out_dir or settings.home / "reports" / "monitoring",
        outcomes,
        weekly_summary(outcomes),
        latest_drift(settings.home),
        read_decisions(settings),
        champion.version if champion else None,
    )
