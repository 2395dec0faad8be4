"""Score a walk-forward run: class metrics, allocation errors and the field's accuracy.

Per target and predictor: accuracy, macro-F1, top-class recall and precision (the
top class holds the largest jobs, the ones a wrong prediction hurts most), the
under-allocation rate (predicted class below the true one), the over-allocation
(mean of the class value written minus what was used, when positive; in the target's
unit) and the relative accuracy of the field, mean(min(a, v) / max(a, v)) with v
the value of the predicted class (a floored at 1 unit so zero-length jobs count).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from panda_predictor.core.assess.calibration_error import (
    cumulative_calibration_error,
    expected_calibration_error,
    reliability_table,
)
from panda_predictor.core.assess.evaluation import evaluate_target
from pipelines.evaluation.trace.bootstrap import ece_interval
from pipelines.evaluation.trace.target_run import PRODUCTION, TargetRun

#: The keys written per predictor into the benchmark's JSON.
JSON_KEYS = (
    "accuracy",
    "macro_f1",
    "top_class_recall",
    "top_class_precision",
    "under_allocation",
    "over_allocation",
)


def relative_accuracy(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Return mean(min(a, p) / max(a, p)), both floored at 1 unit."""
    a = np.maximum(np.asarray(actual, dtype=float), 1.0)
    p = np.maximum(np.asarray(predicted, dtype=float), 1.0)
    return float(np.mean(np.minimum(a, p) / np.maximum(a, p)))


#: The scores of :func:`score_predictions` besides the counts.
SCORE_NAMES = (*JSON_KEYS, "relative_accuracy")


def score_predictions(run: TargetRun, classes: np.ndarray) -> dict[str, float]:
    """Return the metrics of one predictor's classes for ``run``'s test jobs.

    Rows without a class (-1: a predictor or period that yielded none) are left
    out and counted: ``n_test`` is the rows scored, ``n_unpredicted`` the rest;
    a predictor with no class at all scores NaN, never an error.
    """
    k = run.bins.n_classes
    classes = np.asarray(classes)
    scored = classes >= 0
    if not scored.any():
        return {
            **dict.fromkeys(SCORE_NAMES, math.nan),
            "n_test": 0.0,
            "n_unpredicted": float(classes.size),
        }
    y_true, actual = run.y_true[scored], run.actual[scored]
    classes = classes[scored]
    ev = evaluate_target(y_true, classes, n_classes=k, target=run.target)
    values = np.asarray(run.bins.values)[classes]
    return {
        "accuracy": ev.accuracy,
        "macro_f1": ev.macro_f1,
        "top_class_recall": float(ev.recall[k - 1]),
        "top_class_precision": float(ev.precision[k - 1]),
        "under_allocation": ev.under_allocation_rate,
        "over_allocation": float(np.mean(np.maximum(values - actual, 0.0))),
        "relative_accuracy": relative_accuracy(actual, values),
        "n_test": float(classes.size),
        "n_unpredicted": float(scored.size - classes.size),
    }


def score_run(run: TargetRun) -> dict[str, dict[str, float]]:
    """Return metrics per predictor; baselines with a raw value also get
    ``raw_relative_accuracy`` (before binning, comparable with the literature)."""
    out: dict[str, dict[str, float]] = {}
    for name, classes in run.predicted.items():
        scores = score_predictions(run, classes)
        if name in run.raw:
            scores["raw_relative_accuracy"] = relative_accuracy(
                run.actual, run.raw[name]
            )
        out[name] = scores
    return out


def best_model(scores: dict[str, dict[str, float]]) -> str | None:
    """Return the row the goal judges: the production row (what the hook writes).

    Without one (an old result), the model row with the highest macro-F1.
    """
    if "model:production" in scores:
        return "model:production"
    models = [n for n in scores if n.startswith("model:")]
    return max(models, key=lambda n: scores[n]["macro_f1"]) if models else None


def dominated_by(scores: dict[str, dict[str, float]], name: str) -> list[str]:
    """Return the baselines better than ``name`` in under- and over-allocation."""
    ours = scores[name]
    return [
        b
        for b, s in scores.items()
        if b.startswith("baseline:")
        and s["under_allocation"] < ours["under_allocation"]
        and s["over_allocation"] < ours["over_allocation"]
    ]


def f1_behind(scores: dict[str, dict[str, float]], name: str) -> list[str]:
    """Return the baselines whose macro-F1 is at least ``name``'s."""
    ours = scores[name]["macro_f1"]
    return [
        b
        for b, s in scores.items()
        if b.startswith("baseline:") and s["macro_f1"] >= ours
    ]


def goal_summary(scores: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Return the goal checks of one target.

    ``macro_f1_met``: the best model by macro-F1 is ahead of every baseline.
    ``allocation_met``: at least one model row is beaten by no baseline in under-
    and over-allocation at once. ``both_met_by``: model rows meeting both alone.
    ``rows``: per model row, the baselines ahead in macro-F1 and those better in
    both allocation figures.
    """
    models = [n for n in scores if n.startswith("model:")]
    rows = {
        m: {"f1_behind": f1_behind(scores, m), "dominated_by": dominated_by(scores, m)}
        for m in models
    }
    best = best_model(scores)
    return {
        "best_model": best,
        "macro_f1_met": best is not None and not rows[best]["f1_behind"],
        "allocation_met": best is not None and not rows[best]["dominated_by"],
        "both_met_by": [
            m for m, r in rows.items() if not r["f1_behind"] and not r["dominated_by"]
        ],
        "rows": rows,
    }


def verdict(scores: dict[str, dict[str, float]]) -> list[str]:
    """Return the goal checks as text lines (see :func:`goal_summary`)."""
    goal = goal_summary(scores)
    if goal["best_model"] is None:
        return []
    lines = []
    for name, row in goal["rows"].items():
        for b in row["f1_behind"]:
            lines.append(f"{name}: {b} macro-F1 is at least as high")
        for b in row["dominated_by"]:
            lines.append(f"{name}: {b} is better in under- and over-allocation")
    lines.append(
        f"goal macro-F1 ({goal['best_model']}): "
        f"{'met' if goal['macro_f1_met'] else 'NOT met'}; "
        f"goal allocation (some model row undominated): "
        f"{'met' if goal['allocation_met'] else 'NOT met'}; "
        f"one row meets both: {', '.join(goal['both_met_by']) or 'none'}"
    )
    return lines


def format_table(target: str, unit: str, scores: dict[str, dict[str, float]]) -> str:
    """Return one Markdown table of a target's scores, best macro-F1 first."""
    head = (
        "| predictor | accuracy | macro-F1 | top recall | top precision | "
        f"under-alloc | over-alloc ({unit}) | rel. acc. | raw rel. acc. |"
    )
    lines = [f"### {target}", "", head, "|---" * 9 + "|"]
    for name, s in sorted(scores.items(), key=lambda kv: -kv[1]["macro_f1"]):
        raw = s.get("raw_relative_accuracy")
        lines.append(
            f"| {name} | {s['accuracy']:.3f} | {s['macro_f1']:.3f} | "
            f"{s['top_class_recall']:.3f} | {s['top_class_precision']:.3f} | "
            f"{s['under_allocation']:.3f} | {s['over_allocation']:.4g} | "
            f"{s['relative_accuracy']:.3f} | "
            f"{'' if raw is None else f'{raw:.3f}'} |"
        )
    return "\n".join(lines)


def calibration_scores(
    run: TargetRun, days: np.ndarray | None = None
) -> dict[str, dict[str, float]]:
    """Return the test part's ECE of each served distribution of ``run``.

    Per name (``model:production``, the calibrated distribution it served, and
    ``calibration:<method>``, the same served mixture calibrated by each method
    on the retraining's validation part): ``ece`` (top-label) and
    ``cumulative_ece`` (P(y <= k) pooled over k). Given each row's ``days``,
    the production distribution also gets ``ece_low``/``ece_high``, its
    top-label ECE's 90 % interval over resampled days
    (:func:`~pipelines.evaluation.trace.bootstrap.ece_interval`), and ``n_days``.
    """
    out: dict[str, dict[str, float]] = {}
    for name, proba in run.distribution.items():
        if not len(proba):
            continue
        out[name] = {
            "ece": expected_calibration_error(proba, run.y_true),
            "cumulative_ece": cumulative_calibration_error(proba, run.y_true),
        }
        if days is not None and name == PRODUCTION:
            interval = ece_interval(days, proba, run.y_true)
            out[name].update(
                ece_low=interval.low, ece_high=interval.high, n_days=interval.n_days
            )
    return out


#: The distributions whose reliability bins the benchmark keeps: what production
#: served, and the same served mixture before calibration.
RELIABILITY_OF = (PRODUCTION, "calibration:none")


def reliability_bins(run: TargetRun) -> dict[str, dict[str, list[float | None]]]:
    """Return the test part's top-label reliability bins of the served
    distribution, calibrated and not (:data:`RELIABILITY_OF`), for the figure.

    Per name, the columns of
    :func:`~panda_predictor.core.assess.calibration_error.reliability_table`
    (the 15 bins :func:`calibration_scores`' ECE is computed on), JSON-ready.
    """
    return {
        name: reliability_table(run.distribution[name], run.y_true).to_dict()
        for name in RELIABILITY_OF
        if len(run.distribution.get(name, ()))
    }


def format_calibration(scores: dict[str, dict[str, float]]) -> str:
    """Return the calibration scores of one target as one report line."""
    parts = [
        f"{name.removeprefix('calibration:')} {s['ece']:.3f}"
        f"{interval_text(s)} / "
        f"{s['cumulative_ece']:.3f}"
        for name, s in scores.items()
    ]
    return "- calibration, test-part ECE (top-label / cumulative): " + "; ".join(parts)


def interval_text(score: dict[str, float]) -> str:
    """Return " (0.041-0.062 over 120 days)", the top-label ECE's 90 % interval
    over resampled days, or "" without one."""
    if "ece_low" not in score:
        return ""
    return (
        f" ({score['ece_low']:.3f}-{score['ece_high']:.3f} over "
        f"{score['n_days']:.0f} days)"
    )
