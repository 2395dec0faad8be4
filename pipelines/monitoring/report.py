"""Static HTML pages with PNG plots: the monitoring report and the retrain summary.

No server, no JavaScript: one ``index.html`` (or ``summary.html``) next to its PNG
files, readable in any browser or attached to a ticket. Figures are drawn with
matplotlib's Agg backend so no display is needed.
"""

from __future__ import annotations

import html
import logging
import math
import os
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

from model_registry.replay_table import HEADERS  # noqa: E402
from panda_predictor.bins_file import bins_from_settings, load_bins  # noqa: E402
from panda_predictor.core.bins import BinSet  # noqa: E402
from panda_predictor.core.domain.targets import TARGET_NAMES  # noqa: E402
from pipelines.monitoring import figures  # noqa: E402
from pipelines.monitoring.sources import (  # noqa: E402
    GATE_FILE,
    GateResult,
    latest_drift,
    latest_gate,
    training_reports,
)

__all__ = ["latest_drift", "render_report", "write_monitoring_report"]

_STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#eee}img{max-width:100%;border:1px solid #ddd}
.bad{color:#b00;font-weight:bold}.ok{color:#070;font-weight:bold}
.warn{color:#a60;font-weight:bold}"""


def _img(name: str, alt: str) -> str:
    return f'<img src="{html.escape(name)}" alt="{html.escape(alt)}">'


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "&mdash;"
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
    return figures.save(fig, folder, "comparison.png")


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


def _link(folder: Path, target: Path, text: str) -> str:
    href = os.path.relpath(target, folder)
    return f'<a href="{html.escape(href)}">{html.escape(text)}</a>'


def _feedback_section(
    folder: Path, outcomes: pd.DataFrame, weekly: pd.DataFrame
) -> list[str]:
    out = ["<h2>Feedback over time</h2>"]
    if outcomes.empty:
        return out + ["<p>No feedback yet: run 'panda-predictor feedback'.</p>"]
    decisions = outcomes["decision"].value_counts().to_dict()
    out.append(
        f"<p>{len(outcomes)} tasks with outcomes ("
        + html.escape(", ".join(f"{k} {v}" for k, v in sorted(decisions.items())))
        + ").</p>"
    )
    if not weekly.empty:
        out += [_img(name, name) for name in figures.over_time_figures(folder, weekly)]
    return out


#: The confidence (probability that the written value is enough) the coverage
#: table is read at: the decision itself weighs costs, not a threshold.
REFERENCE_CONFIDENCE = 0.9


def _confidence_section(
    folder: Path, outcomes: pd.DataFrame, threshold: float
) -> list[str]:
    out = ["<h2>Calibration and coverage</h2>"]
    has = not outcomes.empty and all(
        f"{t}_confidence" in outcomes for t in TARGET_NAMES
    )
    if (
        not has
        or outcomes[[f"{t}_confidence" for t in TARGET_NAMES]].isna().all().all()
    ):
        return out + ["<p>No audited confidences with outcomes yet.</p>"]
    out += [
        "<p>Observed accuracy against the predicted confidence (the probability "
        "that the written value is enough), in ten bins; the dashed diagonal is "
        "perfect calibration and the numbers are tasks per bin.</p>",
        _img(figures.calibration_figure(folder, outcomes), "calibration per target"),
        "<p>Coverage (share of tasks whose confidence reaches a threshold) and the "
        "accuracy on those tasks as the threshold moves; the dotted line is the "
        f"reference {threshold:g} (the hook itself weighs expected costs).</p>",
        _img(
            figures.coverage_figure(folder, outcomes, threshold),
            "coverage versus accuracy per target",
        ),
    ]
    rows = []
    for target in TARGET_NAMES:
        at = figures.coverage_table(outcomes, target, [threshold]).iloc[0]
        rows.append(
            {
                "target": target,
                "tasks at threshold": int(at["tasks"]),
                "coverage": float(at["coverage"]),
                "accuracy": float(at["accuracy"]),
            }
        )
    return out + [
        _table(rows, ["target", "tasks at threshold", "coverage", "accuracy"])
    ]


def _gate_section(
    folder: Path, gate: GateResult | None, reports: Sequence[Path]
) -> list[str]:
    out = ["<h2>Challenger against champion</h2>"]
    if gate is None:
        out.append(
            "<p>No gate verdict yet: run 'panda-predictor train' or 'retrain'.</p>"
        )
    else:
        css = "ok" if gate.promoted else "bad"
        verdict = "promoted" if gate.promoted else "not promoted"
        against = (
            f"against champion {gate.champion_version}"
            if gate.champion_version is not None
            else "(no champion to compare with)"
        )
        out.append(
            f"<p>Latest gate: version {gate.version} {against}: "
            f'<span class="{css}">{verdict}</span> '
            f"&mdash; {html.escape(gate.reason)} ("
            + _link(folder, gate.folder / GATE_FILE, "gate.json")
            + ")</p>"
        )
        if gate.rows:
            out.append(
                _img(
                    figures.champion_challenger_figure(folder, gate.rows),
                    "challenger against champion per metric",
                )
            )
            out.append(
                _table(
                    gate.rows,
                    [
                        "metric",
                        "challenger",
                        "champion",
                        "tolerance",
                        "better",
                        "verdict",
                    ],
                )
            )
    if gate is not None and gate.replay.rows:
        out += _replay_section(gate)
    if reports:
        out.append(
            "<p>Training reports (newest first): "
            + ", ".join(_link(folder, p, p.parent.name) for p in reports)
            + "</p>"
        )
    return out


def _replay_section(gate: GateResult) -> list[str]:
    """Return the latest challenger's decision against the scouts on its test
    tasks (the figures the gate judged), a row per target."""
    rows = [dict(zip(HEADERS, r.cells(), strict=True)) for r in gate.replay.rows]
    out = [
        f"<h3>Version {gate.version}'s decision against the scouts "
        "(its test tasks' jobs replayed)</h3>",
        _table(rows, HEADERS),
    ]
    if gate.replay.kept_scouts is not None:
        out.append(f"<p>{html.escape(gate.replay.kept_scouts_text())}</p>")
    return out


#: Headline and CSS class of each drift verdict (core.assess.drift_verdict's VERDICTS).
VERDICT_TEXT = {
    "drift": "drift detected",
    "no_drift": "no drift",
    "too_few_outcomes": "too few outcomes for a verdict",
}
VERDICT_CLASSES = {"drift": "bad", "no_drift": "ok", "too_few_outcomes": "warn"}


def _drift_section(
    folder: Path,
    drift: Mapping[str, Any] | None,
    drift_runs: Sequence[Mapping[str, Any]] | None,
) -> list[str]:
    out = ["<h2>Drift</h2>"]
    if drift is None:
        out.append("<p>No drift check yet: run 'panda-predictor drift'.</p>")
    else:
        verdict = drift.get("verdict", "drift" if drift["drifted"] else "no_drift")
        out.append(
            f'<p class="{VERDICT_CLASSES.get(verdict, "ok")}">'
            f"{VERDICT_TEXT.get(verdict, verdict)}</p><p>"
            f"Window {html.escape(str(drift['since']))} .. "
            f"{html.escape(str(drift['until']))}, {drift['n_tasks']} tasks; "
            + html.escape("; ".join(drift["reasons"]))
            + "</p>"
        )
        out.append(
            _img(figures.drift_snapshot_figure(folder, drift), "drift per feature")
        )
    out.append("<h3>Drift trend</h3>")
    if not drift_runs:
        return out + ["<p>No drift runs recorded.</p>"]
    ordered = sorted(drift_runs, key=lambda r: r["run_at"])
    out += [
        "<p>PSI per feature over the drift runs; dashed: the feature's threshold. "
        "Marker colour: the run's verdict (red drift, green no drift, grey too few "
        "outcomes); filled: this feature raised the alarm.</p>",
        _img(figures.drift_trend_figure(folder, ordered), "PSI per feature over runs"),
    ]
    rows = [
        {
            "run_at": f"{r['run_at']:%Y-%m-%d %H:%M}",
            "verdict": r["verdict"],
            "model_version": r.get("model_version") or "",
            "alarms": ", ".join(
                sorted(n for n, f in r.get("features", {}).items() if f.get("alarm"))
            ),
            **{
                f"under {t}": v
                for t, v in sorted(r.get("under_allocation", {}).items())
            },
        }
        for r in reversed(ordered)
    ]
    targets = sorted({t for r in ordered for t in r.get("under_allocation", {})})
    columns = ["run_at", "verdict", "model_version", "alarms"]
    return out + [_table(rows, columns + [f"under {t}" for t in targets])]


def _confusion_section(
    folder: Path,
    outcomes: pd.DataFrame,
    champion_version: int | None,
    bins: BinSet,
) -> list[str]:
    out = [f"<h2>Confusion matrices of the champion (version {champion_version})</h2>"]
    mine = outcomes
    if champion_version is not None and not outcomes.empty:
        mine = outcomes[outcomes["model_version"].astype(str) == str(champion_version)]
    if mine.empty:
        return out + ["<p>No feedback for the champion yet.</p>"]
    return out + [
        f"<p>{len(mine)} tasks; rows are the true class measured on the first "
        "finished jobs, columns the class written; every class of the bins is "
        "shown, also those never seen.</p>",
        _img(
            figures.confusion_figure(folder, mine, bins.targets), "confusion matrices"
        ),
    ]


def write_monitoring_report(
    folder: Path,
    outcomes: pd.DataFrame,
    weekly: pd.DataFrame,
    drift: Mapping[str, Any] | None,
    decisions: Sequence[Mapping[str, Any]],
    champion_version: int | None,
    *,
    bins: BinSet | None = None,
    gate: GateResult | None = None,
    training_reports: Sequence[Path] = (),
    confidence_threshold: float = REFERENCE_CONFIDENCE,
    drift_runs: Sequence[Mapping[str, Any]] | None = None,
) -> Path:
    """Write ``index.html``: feedback, calibration, gate, drift, confusions, decisions.

    Parameters
    ----------
    folder:
        Output folder (created); PNGs go next to the page.
    outcomes, weekly:
        Outcome rows and their
        :func:`~panda_predictor.core.assess.feedback.weekly_summary`; with
        ``<target>_confidence`` columns (from the audit) the calibration and coverage
        curves are drawn.
    drift:
        The last drift check (see :func:`latest_drift`), or None.
    decisions:
        Last retraining decisions (see
        :func:`pipelines.monitoring.retrain_log.read_decisions`).
    champion_version:
        Version whose confusion matrices are drawn (from its feedback).
    bins:
        Classes of the targets (names and ranges on the matrices); default: the
        packaged bins.
    gate:
        The latest gate verdict (see :func:`latest_gate`), or None.
    training_reports:
        Training reports to link, newest first.
    confidence_threshold:
        The configured threshold, marked on the coverage curves.
    drift_runs:
        Drift runs, each ``{"run_at": datetime, "verdict": "drift" | "no_drift" |
        "too_few_outcomes", "model_version": str | None, "features": {name: {"psi",
        "threshold", "alarm"}}, "under_allocation": {target: float}}``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    bins = bins or load_bins(None)
    sections = [
        *_feedback_section(folder, outcomes, weekly),
        *_confidence_section(folder, outcomes, confidence_threshold),
        *_gate_section(folder, gate, training_reports),
        *_drift_section(folder, drift, drift_runs),
        *_confusion_section(folder, outcomes, champion_version, bins),
        "<h2>Last retraining decisions</h2>",
    ]
    cols = ["until", "status", "version", "champion_version", "reason"]
    sections.append(
        _table(list(reversed(decisions)), cols)
        if decisions
        else "<p>No retraining yet.</p>"
    )
    path = folder / "index.html"
    path.write_text(_page("panda-predictor monitoring report", sections))
    return path


def with_confidences(outcomes: pd.DataFrame, confidences: pd.DataFrame) -> pd.DataFrame:
    """Return ``outcomes`` with each task's audited ``<target>_confidence`` joined."""
    if outcomes.empty:
        return outcomes
    keep = ["jeditaskid", *(f"{t}_confidence" for t in TARGET_NAMES)]
    right = confidences[keep].astype({"jeditaskid": "int64"})
    left = outcomes.drop(columns=[c for c in keep[1:] if c in outcomes])
    return left.astype({"jeditaskid": "int64"}).merge(
        right, on="jeditaskid", how="left"
    )


#: Drift runs the trend shows.
DRIFT_TREND_RUNS = 20


def render_report(
    settings: Any,
    out_dir: Path | None = None,
    drift_runs: Sequence[Mapping[str, Any]] | None = None,
) -> Path:
    """Gather feedback, confidences, gate, drift, decisions; write the page."""
    from model_registry.registry import NoChampionError, champion_version
    from panda_predictor.core.assess.feedback import weekly_summary
    from panda_predictor.db.audit_confidence import read_confidences
    from panda_predictor.db.drift_runs import recent_drift_runs
    from panda_predictor.db.engine import make_engine
    from panda_predictor.db.outcomes import read_outcomes
    from pipelines.monitoring.retrain_log import read_decisions

    engine = make_engine(settings)
    try:
        outcomes = read_outcomes(engine, settings)
        confidences = read_confidences(engine, settings)
        if drift_runs is None:  # the trend lives in the database, not on a disk
            drift_runs = recent_drift_runs(engine, DRIFT_TREND_RUNS, settings)
    finally:
        engine.dispose()
    try:
        champion = champion_version(settings)
    except NoChampionError as exc:  # no store yet: the page says no champion
        log.warning("monitoring report without a champion: %s", exc)
        champion = None
    return write_monitoring_report(
        out_dir or settings.home / "reports" / "monitoring",
        with_confidences(outcomes, confidences),
        weekly_summary(outcomes),
        latest_drift(settings.home),
        read_decisions(settings),
        champion.version if champion else None,
        bins=bins_from_settings(settings),
        gate=latest_gate(settings.home),
        training_reports=training_reports(settings.home),
        confidence_threshold=REFERENCE_CONFIDENCE,
        drift_runs=drift_runs,
    )
