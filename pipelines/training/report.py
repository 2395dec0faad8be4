"""Write the evaluation report: Markdown tables and PNG plots, models side by side.

The training pipeline calls it once per run, with every model scored on the same
test set::

    from panda_predictor.core.decide.tail_rule import coverage_accuracy_curve
    from panda_predictor.core.assess.evaluation import all_correct, evaluate_targets
    from pipelines.training.report import write_report

    evaluations = {
        "xgboost": evaluate_targets(y_test, pred_xgb, n_classes, class_names),
        "keras": evaluate_targets(y_test, pred_keras, n_classes, class_names),
    }
    tail_reports = {"xgboost": {"ramcount": rule_xgb_ram.report_, ...}, ...}
    coverage = {"xgboost": coverage_accuracy_curve(min_conf_xgb,
                                                   all_correct(y_test, pred_xgb)), ...}
    path = write_report(out_dir, evaluations, tail_reports, coverage,
                        metadata={"test rows": 1234, "trained on": "2024-01..2025-03"})

``path`` is ``out_dir/report.md``; the plots go to ``out_dir/img/``. The figures are
drawn by :mod:`pipelines.training.report_figures` and released after saving.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from model_registry.replay_table import HEADERS, Replay
from panda_predictor.core.assess.calibration_error import (
    cumulative_calibration_error,
    expected_calibration_error,
)
from panda_predictor.core.assess.evaluation import (
    MultiTargetEvaluation,
    TargetEvaluation,
)
from panda_predictor.core.decide.calibration import Calibrator
from panda_predictor.core.decide.tail_rule import CoverageCurve
from panda_predictor.core.reason_text import number
from pipelines.training.cost_tuning import SCOUTS_VALUE_LABEL
from pipelines.training.report_figures import (
    plot_confusion,
    plot_coverage,
    plot_recall_bars,
    plot_reliability,
    save_png,
)

IMG_DIR = "img"


def _cell(value: Any) -> str:
    """Format one Markdown table cell: 3 decimals for floats, a mapping as
    ``key: value`` pairs, pipes escaped."""
    if isinstance(value, float | np.floating):
        return "n/a" if np.isnan(value) else f"{value:.3f}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_short(v)}" for k, v in value.items())
    return str(value).replace("|", "\\|").replace("\n", " ")


def _short(value: Any) -> str:
    """Return a value inside a cell: 4 significant digits for floats."""
    if isinstance(value, float | np.floating):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return "{" + _cell(value) + "}"
    return _cell(value)


def _prices_section(cost: Mapping[str, Any]) -> list[str]:
    """Return the delay prices training chose, with every candidate's figures.

    ``cost`` is the bundle's ``info["cost"]``
    (:func:`pipelines.training.cost_tuning.choose_price`); without its
    ``margin_at`` (a configured price) only the price is told.
    """
    lines = ["## Delay prices chosen on the validation part", ""]
    margins: Mapping[str, Mapping[str, float]] = cost.get("margin_at") or {}
    if not margins:
        price = cost.get("delay_price")
        return [*lines, f"One delay price for every target: {price} (configured).", ""]
    lines += [
        "Per target the served decision ran over the validation tasks once per "
        "candidate delay price (the core-hours one hour of a job's delay is worth; "
        "dearer is more careful) and its values were replayed against the scouts. "
        "*margin*: the smaller of the relative savings in failed jobs and in "
        "wasted hours against the scouts, at the lower quartile of resampled days "
        "(0.2: both 20 % better; negative: worse than the scouts on one). *short*: "
        "the share of jobs given less than they used. The chosen candidate is in "
        f"bold; `{SCOUTS_VALUE_LABEL}` writes what the scouts would ask for and "
        "still starts at once. *~*: fails no more jobs and wastes no more hours "
        "than the scouts beyond the noise of resampled days (the gate's goals), "
        f"and saves waste; where `{SCOUTS_VALUE_LABEL}` has the best margin, the "
        "best-margin price so marked is served instead.",
        "",
    ]
    fixed = set(cost.get("fixed_targets", ()))
    shorts: Mapping[str, Mapping[str, float]] = cost.get("short_at") or {}
    savings: Mapping[str, Mapping[str, float]] = (
        cost.get("saving_within_noise_at") or {}
    )
    targets = list(margins)
    chosen = cost.get("chosen", {})
    header = ["candidate"]
    for t in targets:
        header += [f"{t} margin{' (Fixed)' if t in fixed else ''}", f"{t} short"]
    rows = []
    for label in margins[targets[0]]:
        row: list[Any] = [label]
        for t in targets:
            by = cost["fixed_margin_at"][t] if t in fixed else margins[t]
            mark = "**" if chosen.get(t) == label else ""
            saves = t not in fixed and savings.get(t, {}).get(label, 0.0) > 0
            tilde = " ~" if saves else ""
            row += [f"{mark}{by.get(label, float('nan')):.3g}{mark}{tilde}"]
            row += [f"{shorts.get(t, {}).get(label, float('nan')):.3f}"]
        rows.append(row)
    lines += _table(header, rows)
    if fixed:
        lines += [
            f"Written `...Fixed` (PanDA's re-measurement keeps them): "
            f"{', '.join(sorted(fixed))}; their margins are the fixed values'.",
            "",
        ]
    if cost.get("early_remeasure"):
        lines += [
            "Sized for the early re-measurement (the `early_remeasure` setting): "
            "a task written its scouts' first values (every applied task, beside "
            "a target written its scouts' value) is re-measured after 3 "
            "finished jobs, in these margins too; a price must beat "
            f"`{SCOUTS_VALUE_LABEL}`, a tie goes to it.",
            "",
        ]
    asked = cost.get("early_remeasure_chosen")
    if asked:
        served = asked["served_margin"]
        way = "on" if cost.get("early_remeasure") else "off"
        why = (
            "re-measured early, no price beats the scouts' own value, so its "
            "tasks replay as the scouts do; "
            if asked.get("as_scouts", {}).get("True")
            else ""
        )
        lines += [
            f"The early re-measurement was chosen {way} ('auto'): {why}the worst "
            f"chosen target's margin is {served['True']:.4g} with it and "
            f"{served['False']:.4g} without it (a tie leaves it off).",
            "",
        ]
    return lines


def _replay_section(replay: Replay) -> list[str]:
    """Return the served decision against the scouts: the report's first section."""
    lines = [
        "## The served decision against the scouts (test tasks replayed)",
        "",
        "Every test task's jobs replayed with their true use under what the bundle "
        "serves (cost choice, calibration, combination) and under PanDA's scouts; "
        "the champion gate judges these figures (docs/model-registry.md in the "
        "project).",
        "",
        *_table(list(HEADERS), [list(r.cells()) for r in replay.rows]),
    ]
    if replay.kept_scouts is not None:
        lines += [replay.kept_scouts_text(), ""]
    return lines


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """Return the lines of a Markdown table."""
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |"]
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _slug(text: str) -> str:
    """Return a file-name-safe version of ``text``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def _calibration_section(
    calibration: Mapping[str, Any],
    calibrators: Mapping[str, Calibrator],
    img: Path,
    out_dir: Path,
) -> list[str]:
    """Return the ECE table per target and write the reliability figures.

    ``calibration`` maps a target to its served distributions before calibration
    (:class:`pipelines.training.calibration.ServedParts`); ``calibrators`` the fitted
    ones.
    """
    rows, images = [], []
    for target, served in calibration.items():
        calibrator = calibrators[target]
        parts = {}
        for name, raw, y, followed in (
            ("validation", served.val, served.y_val, served.followed_val),
            ("test", served.test, served.y_test, served.followed_test),
        ):
            known = y >= 0
            groups = followed[known] if len(followed) else None
            if known.any():
                after = calibrator.transform(raw[known], groups)
                parts[name] = (raw[known], after, y[known])
        for name, (before, after, y) in parts.items():
            rows.append(
                [
                    target,
                    name,
                    calibrator.method,
                    int(y.size),
                    expected_calibration_error(before, y),
                    expected_calibration_error(after, y),
                    cumulative_calibration_error(before, y),
                    cumulative_calibration_error(after, y),
                ]
            )
        if parts:
            png = img / f"reliability_{_slug(target)}.png"
            save_png(plot_reliability(target, parts), png)
            images.append(
                f"![{target} reliability]({png.relative_to(out_dir).as_posix()})"
            )
    header = [
        "target",
        "part",
        "method",
        "tasks",
        "ECE before",
        "ECE after",
        "cumulative ECE before",
        "cumulative ECE after",
    ]
    return (
        [
            "## Calibration of the served distribution",
            "",
            "Per target the served distribution (the model's probabilities, or "
            "their mix with the class of the rule the combination follows) is "
            "calibrated on the validation part; the confidence is P(true class <= "
            "written class) under the calibrated one. ECE: top-label expected "
            "calibration error (15 bins); cumulative: of P(y <= k) pooled over k.",
            "",
        ]
        + _table(header, rows)
        + images
        + [""]
    )


def _joint_section(evaluations: Mapping[str, MultiTargetEvaluation]) -> list[str]:
    """Return the table of joint metrics, one column per model."""
    models = list(evaluations)
    first = evaluations[models[0]]
    names = [
        ("test tasks", "n_samples"),
        ("exact match (all targets right)", "exact_match_rate"),
        ("mean per-target accuracy", "mean_accuracy"),
    ]
    rows = [
        [label] + [getattr(evaluations[m], attr) for m in models]
        for label, attr in names
    ]
    for k in first.at_least_right:
        rows.append(
            [f"at least {k} right"]
            + [evaluations[m].at_least_right.get(k, float("nan")) for m in models]
        )
    return ["## All targets together", ""] + _table(["metric", *models], rows)


def _target_section(
    target: str, evs: Mapping[str, TargetEvaluation], img: Path, out_dir: Path
) -> list[str]:
    """Return one target's tables and write its plots."""
    models = list(evs)
    lines = [f"## {target}", ""]
    metrics = [
        ("accuracy", "accuracy"),
        ("macro-F1", "macro_f1"),
        ("under-allocation rate", "under_allocation_rate"),
        ("over-allocation rate", "over_allocation_rate"),
    ]
    lines += _table(
        ["metric", *models],
        [[label] + [getattr(evs[m], a) for m in models] for label, a in metrics],
    )
    first = evs[models[0]]
    header = ["class", "support"] + [
        f"{m} {s}" for m in models for s in ("precision", "recall", "F1")
    ]
    rows = [
        [first.class_names[k], int(first.support[k])]
        + [
            v
            for m in models
            for v in (evs[m].precision[k], evs[m].recall[k], evs[m].f1[k])
        ]
        for k in range(first.n_classes)
    ]
    lines += _table(header, rows)
    bars = img / f"recall_{_slug(target)}.png"
    save_png(plot_recall_bars(evs, target), bars)
    lines += [
        f"![{target} recall per class]({bars.relative_to(out_dir).as_posix()})",
        "",
    ]
    for model, ev in evs.items():
        png = img / f"confusion_{_slug(target)}_{_slug(model)}.png"
        save_png(plot_confusion(ev, model), png)
        lines.append(
            f"![{target} confusion {model}]({png.relative_to(out_dir).as_posix()})"
        )
    return lines + [""]


def _tail_section(
    tail_reports: Mapping[str, Mapping[str, Mapping[Any, Any]]],
) -> list[str]:
    """Return the table of tail thresholds and what they cost in precision."""
    rows = []
    for model, by_target in tail_reports.items():
        for target, report in by_target.items():
            for cls, r in report.items():
                rows.append(
                    [
                        model,
                        target,
                        cls,
                        r["threshold"],
                        r["support"],
                        r["recall_argmax"],
                        r["recall_rule"],
                        r["precision_argmax"],
                        r["precision_rule"],
                        r["precision_paid"],
                        "yes" if r.get("fallback") else "no",
                    ]
                )
    header = [
        "model",
        "target",
        "class",
        "threshold",
        "val support",
        "recall argmax",
        "recall rule",
        "precision argmax",
        "precision rule",
        "precision paid",
        "fallback",
    ]
    return [
        "## Tail decision rules (validation data)",
        "",
        "Thresholds on P(class >= k) tuned on validation data to reach the recall "
        "target; the precision paid is argmax precision minus rule precision.",
        "",
    ] + _table(header, rows)


def _coverage_section(
    curves: Mapping[str, CoverageCurve], img: Path, out_dir: Path
) -> list[str]:
    """Return the coverage table and write the coverage plot."""
    png = img / "coverage_accuracy.png"
    save_png(plot_coverage(curves), png)
    rows = []
    for model, curve in curves.items():
        for t, c, a, n in zip(
            curve.thresholds,
            curve.coverage,
            curve.accuracy,
            curve.n_decided,
            strict=True,
        ):
            rows.append([model, float(t), float(c), float(a), int(n)])
    return [
        "## Coverage vs accuracy",
        "",
        f"![coverage vs accuracy]({png.relative_to(out_dir).as_posix()})",
        "",
    ] + _table(
        ["model", "confidence threshold", "coverage", "accuracy", "decided tasks"], rows
    )


def _kind_choice_section(
    served_kinds: Mapping[str, str],
    validation_f1: Mapping[str, Mapping[str, float]],
    evaluations: Mapping[str, MultiTargetEvaluation],
) -> list[str]:
    """Return the table saying which kind serves each target and why.

    :param served_kinds: target -> the kind the bundle serves.
    :param validation_f1: kind -> target -> macro-F1 on the validation part.
    :param evaluations: the test-set scores, for the test macro-F1 columns.
    """
    kinds = list(validation_f1)
    header = ["target", "served kind"]
    header += [f"{k} val macro-F1" for k in kinds]
    header += [f"{k} test macro-F1" for k in kinds if k in evaluations]
    header.append("why")
    rows = []
    for target, served in served_kinds.items():
        scores = {k: float(validation_f1[k][target]) for k in kinds}
        others = [k for k in kinds if k != served]
        if others:
            runner = max(others, key=scores.__getitem__)
            why = (
                f"best validation macro-F1: {served} "
                f"{number(scores[served], scores[runner], 3)} vs {runner} "
                f"{number(scores[runner], scores[served], 3)}"
            )
        else:
            why = f"only kind trained ({served})"
        rows.append(
            [target, served]
            + [scores[k] for k in kinds]
            + [
                evaluations[k].targets[target].macro_f1
                for k in kinds
                if k in evaluations
            ]
            + [why]
        )
    mixed = len(set(served_kinds.values())) > 1
    return [
        "## Which model kind serves each target",
        "",
        "Per target the bundle serves the kind with the best macro-F1 on the "
        "validation part (the test part is kept for the figures in this report). "
        + (
            "The kinds differ between targets: a mixed bundle, chosen because each "
            "target is served by the kind that validated better."
            if mixed
            else "One kind serves every target."
        ),
        "",
    ] + _table(header, rows)


def write_report(
    out_dir: str | Path,
    evaluations: Mapping[str, MultiTargetEvaluation],
    tail_reports: Mapping[str, Mapping[str, Mapping[Any, Any]]] | None = None,
    coverage: Mapping[str, CoverageCurve] | None = None,
    metadata: Mapping[str, Any] | None = None,
    title: str = "panda-predictor evaluation",
    served_kinds: Mapping[str, str] | None = None,
    validation_f1: Mapping[str, Mapping[str, float]] | None = None,
    calibration: Mapping[str, Any] | None = None,
    calibrators: Mapping[str, Calibrator] | None = None,
    replay: Replay | None = None,
    prices: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``report.md`` and its PNG plots into ``out_dir``; return the report's path.

    :param out_dir: folder to write into (created if missing).
    :param evaluations: model name -> its scores on the shared test set.
    :param tail_reports: model name -> target -> ``TailDecisionRule.report_``.
    :param coverage: model name -> coverage-vs-accuracy curve on the test set.
    :param metadata: free key -> value pairs listed at the top (data range, commit...).
    :param title: the report's first heading.
    :param served_kinds: target -> kind the bundle serves (training reports).
    :param validation_f1: kind -> target -> validation macro-F1, the numbers the
        served kind was chosen on; with ``served_kinds`` the report says why.
    :param calibration: target -> served distributions before calibration on the
        validation and test parts (``pipelines.training.calibration.ServedParts``); with
        ``calibrators`` (target -> fitted calibrator) the report shows the ECE
        and a reliability figure per target.
    :param replay: the served decision against the scouts on the test tasks (the
        gate's :class:`~model_registry.replay_table.Replay`), the product's
        headline figure: the report opens with it.
    :param prices: the bundle's ``info["cost"]``: the delay prices training chose
        and every candidate's figures on the validation part.
    """
    if not evaluations:
        raise ValueError(
            "The 'evaluations' field must name at least one model. Got {}."
        )
    targets = list(next(iter(evaluations.values())).targets)
    for model, ev in evaluations.items():
        if list(ev.targets) != targets:
            raise ValueError(
                f"Every model must be scored on the same targets {targets}. "
                f"Got {list(ev.targets)} for {model!r} instead."
            )
    out = Path(out_dir)
    img = out / IMG_DIR
    img.mkdir(parents=True, exist_ok=True)
    lines = [f"# {title}", ""]
    if replay is not None and replay.rows:
        lines += _replay_section(replay)
    if metadata:
        lines += ["## The run", ""]
        lines += _table(["key", "value"], [[k, v] for k, v in metadata.items()])
    if prices:
        lines += _prices_section(prices)
    if served_kinds and validation_f1:
        lines += _kind_choice_section(served_kinds, validation_f1, evaluations)
    lines += _joint_section(evaluations)
    for target in targets:
        evs = {m: ev.targets[target] for m, ev in evaluations.items()}
        lines += _target_section(target, evs, img, out)
    if tail_reports:
        lines += _tail_section(tail_reports)
    if coverage:
        lines += _coverage_section(coverage, img, out)
    if calibration and calibrators:
        lines += _calibration_section(calibration, calibrators, img, out)
    path = out / "report.md"
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return path
