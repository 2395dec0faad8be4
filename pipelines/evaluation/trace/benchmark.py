"""Benchmark the classifiers against the field's baselines on a real job log (SWF).

Thin runner: read the trace, walk forward through its newest part
(:mod:`pipelines.evaluation.trace.log_walk`), score models and baselines
(:mod:`pipelines.evaluation.trace.scoring`), replay the cost of scouts versus
prediction (:mod:`pipelines.evaluation.trace.replay`), then write the tables, the JSON
and an MLflow run (experiment ``panda-predictor-traces``).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from panda_predictor.core.decide.experts import EXPERTS
from panda_predictor.core.replay.peers import PEER_METHODS, peer_requests
from panda_predictor.errors import UserInputError
from panda_predictor.ingest import (
    JobLogReport,
    available_targets,
    read_job_log,
    trace_name,
)
from panda_predictor.ingest.swf import MIN_RECORDED, TRACE_TARGETS
from pipelines.evaluation.trace.bootstrap import MarginInterval, margin_interval
from pipelines.evaluation.trace.hindsight import format_hindsight, hindsight_row
from pipelines.evaluation.trace.log_walk import (
    MIN_TRAIN_TASKS,
    WalkForwardConfig,
    WalkForwardResult,
    development_part,
    run_walk_forward,
)
from pipelines.evaluation.trace.replay import (
    RESOURCE,
    difference_by_place,
    format_difference,
    format_replay,
    replay_target,
)
from pipelines.evaluation.trace.scoring import (
    JSON_KEYS,
    best_model,
    calibration_scores,
    format_calibration,
    format_table,
    goal_summary,
    reliability_bins,
    score_run,
    verdict,
)
from pipelines.evaluation.trace.summary import early_remeasure_retrainings
from pipelines.evaluation.trace.target_run import PRODUCTION, REQUEST_OF, TargetRun

logger = logging.getLogger(__name__)

#: MLflow experiment of the trace benchmarks.
TRACES_EXPERIMENT = "panda-predictor-traces"


@dataclass
class BenchmarkResult:
    """Scores, replay outcomes and the text report of one trace."""

    file: str
    split: dict[str, Any]
    scores: dict[str, dict[str, dict[str, float]]]
    replay: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Per target, where the production row's replay differs from the scouts'
    #: (:func:`~pipelines.evaluation.trace.replay.difference_by_place`).
    replay_difference: dict[str, dict[str, list[dict[str, Any]]]] = field(
        default_factory=dict
    )
    #: Per target, the production row with the scouts kept on the tasks chosen
    #: with hindsight (:func:`~pipelines.evaluation.trace.hindsight.hindsight_row`).
    hindsight: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_available: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    margins: dict[str, dict[str, Any]] = field(default_factory=dict)
    production: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per target, the test part's ECE of each served distribution
    #: (:func:`~pipelines.evaluation.trace.scoring.calibration_scores`).
    calibration: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    #: Per target, the test part's reliability bins of the served distribution,
    #: calibrated and not
    #: (:func:`~pipelines.evaluation.trace.scoring.reliability_bins`).
    reliability: dict[str, dict[str, dict[str, list]]] = field(default_factory=dict)
    report: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Return the documented JSON form: file, split and the six figures."""
        return {
            "file": self.file,
            "split": self.split,
            "targets": {
                target: {
                    name: {k: float(s[k]) for k in JSON_KEYS}
                    for name, s in per_name.items()
                }
                for target, per_name in self.scores.items()
            },
        }


def walk_config(settings: Any, **options: Any) -> WalkForwardConfig:
    """Return the walk's settings: ``options`` (the command's), with the tail
    recall target and the delay price from the deployment's ``settings``, so
    every caller benchmarks with what an operator set."""
    return WalkForwardConfig(
        **options,
        recall_target=settings.tail_recall_target,
        delay_price=settings.delay_price,
        early_remeasure=settings.early_remeasure,
    )


def report_folder(path: str | Path, dev: bool) -> str:
    """Return the name of a log's report folder (``-dev`` for a development run,
    so it never overwrites the test run's)."""
    return trace_name(path) + ("-dev" if dev else "")


def run_benchmark(
    path: str | Path,
    config: WalkForwardConfig,
    max_jobs: int | None = None,
    dev: bool = False,
) -> BenchmarkResult:
    """Run the whole benchmark of one job log and return its result (no writing).

    :param path: the job log (SWF or condor_history -json; gzip or plain).
    :param config: split and model settings.
    :param max_jobs: keep only the newest this many jobs (None: all), for speed.
    :param dev: development run: drop the test part first (see
        :func:`~pipelines.evaluation.trace.log_walk.development_part`).
    """
    started = time.perf_counter()
    frame, report, targets = _read_log(path, config, max_jobs, dev)
    wf = run_walk_forward(frame, targets, config)
    scores = {t: score_run(run) for t, run in wf.runs.items() if run.rows.size}
    result = BenchmarkResult(
        file=Path(path).name,
        split={
            **wf.split,
            "max_jobs": max_jobs,
            "models": ["xgboost"],
            "development_run": dev,
        },
        scores=scores,
        not_available=[t for t in TRACE_TARGETS if t not in targets],
        notes=list(wf.warnings),
    )
    title = trace_name(path) + (" (development run: test part dropped)" if dev else "")
    sections = [
        f"## {title}",
        "",
        *(f"- {x}" for x in report.lines()),
        f"- split: {json.dumps(_without(result.split, 'self_tuning'))}",
        *_self_tuning_lines(cast(dict, wf.split.get("self_tuning", {}))),
        "",
    ]
    left_out = cast(dict, wf.split.get("targets_left_out", {}))
    short = [
        p for p in cast(list, wf.split["periods_without_model"]) if p not in left_out
    ]
    if not scores and short:
        sections.append(
            "- no test period had enough finished history to train on "
            f"({MIN_TRAIN_TASKS} tasks with labels before it): every task keeps "
            "its scouts, nothing is scored"
        )
    for target, per_name in scores.items():
        sections += _target_sections(frame, wf, target, per_name, result)
    sections += _unscored_lines(targets, scores, wf.split)
    for target in result.not_available:
        sections.append(f"- {target}: not available in this file")
    result.seconds = time.perf_counter() - started
    sections.append(f"- run time of the benchmark: {result.seconds:.0f} s")
    result.report = "\n".join(sections)
    return result


def _read_log(
    path: str | Path, config: WalkForwardConfig, max_jobs: int | None, dev: bool
) -> tuple[pd.DataFrame, JobLogReport, list[str]]:
    """Read the job log; return its jobs, its reader's report and its targets."""
    frame, report = read_job_log(path)
    if max_jobs is not None and len(frame) > max_jobs:
        frame = frame.iloc[-max_jobs:].reset_index(drop=True)
    if dev:
        frame = development_part(frame, config.test_fraction)
    targets = [
        t
        for t in available_targets(report)
        if t in RESOURCE or t in ("cputime", "iointensity")
    ]
    if not targets:
        raise UserInputError(
            f"The job log must record at least one target (run time, CPU time, "
            f"used memory or I/O) for {MIN_RECORDED} jobs or more. Got none in "
            f"{str(path)!r} instead."
        )
    return frame, report, targets


def _unscored_lines(
    targets: list[str], scores: dict[str, Any], split: dict[str, Any]
) -> list[str]:
    """Say why a recorded target has no score, or which periods left it out."""
    unbinned = cast(list, split.get("targets_without_classes", []))
    left_out = cast(dict, split.get("targets_left_out", {}))
    n_periods = len(cast(list, split.get("test_periods", [])))
    lines = []
    for target in targets:
        if target in unbinned:
            lines.append(
                f"- {target}: not benchmarked: recorded by no job of the older "
                "part, so it has no classes to fit"
            )
            continue
        reasons = Counter(why[target] for why in left_out.values() if target in why)
        if not reasons:
            continue
        said = "; ".join(f"{why}: {n}" for why, n in reasons.items())
        if target not in scores:
            lines.append(
                f"- {target}: not scored: no retraining could learn it ({said} "
                f"of the {n_periods} periods)"
            )
        else:
            lines.append(
                f"- {target}: left out of {sum(reasons.values())} of the "
                f"{n_periods} retrainings ({said}); those periods' tasks are not "
                "scored"
            )
    return lines


def _target_sections(
    frame: pd.DataFrame,
    wf: WalkForwardResult,
    target: str,
    per_name: dict[str, dict[str, float]],
    result: BenchmarkResult,
) -> list[str]:
    """Score, summarise and replay one target; return its report lines.

    Fills ``result``'s per-target margins, production summary, calibration and
    replay outcomes on the way.
    """
    unit = TRACE_TARGETS[target][1]
    sections = [format_table(target, unit, per_name), ""]
    for note in verdict(per_name):
        sections.append(f"- {note}")
    run = wf.runs[target]
    lead = _lead_interval(frame, run, per_name)
    if lead is not None:
        result.margins[target] = lead.to_dict()
        sections.append(f"- {lead.describe()}")
    result.production[target] = _production_summary(run)
    sections += _production_lines(result.production[target])
    test_days = frame["submit_s"].to_numpy()[run.rows] // 86400
    result.calibration[target] = calibration_scores(run, test_days)
    result.reliability[target] = reliability_bins(run)
    sections.append(format_calibration(result.calibration[target]))
    sections.append("")
    best = best_model(per_name)
    if best is not None and target in RESOURCE:
        replayed = replay_target(
            frame,
            wf.runs[target],
            wf.task_key,
            [n for n in per_name if n.startswith("model:")],
            1.0,  # every model row carries its own applied flags
            peers=peer_rows(frame, wf, target),
        )
        outcomes = replayed.outcomes
        result.replay[target] = [o.to_dict() for o in outcomes]
        sections += [format_replay(target, outcomes), ""]
        if PRODUCTION in per_name:
            groups = difference_by_place(replayed, run, PRODUCTION)
            result.replay_difference[target] = {
                kind: [r.to_dict() for r in rows] for kind, rows in groups.items()
            }
            sections += [format_difference(target, PRODUCTION, groups), ""]
            hindsight = hindsight_row(replayed, PRODUCTION)
            result.hindsight[target] = hindsight.to_dict()
            sections += [format_hindsight(target, PRODUCTION, hindsight), ""]
    elif target == "iointensity":
        sections += [
            "- replay: n/a for iointensity (no log records an I/O request, and "
            "the replay covers time and memory only)",
            "",
        ]
    return sections


def peer_rows(
    frame: pd.DataFrame, wf: Any, target: str
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Return each published sizing method's (first, retry) request per test row.

    Sized from every job of the log (its key's history known strictly before the
    job's submission: a past job counts from its finish), then read at the test
    rows; the user's request caps them and is the regression's input where the
    log has one (else the processors). See :mod:`panda_predictor.core.replay.peers`.
    """
    run = wf.runs[target]
    used = wf.tasks[target].to_numpy(dtype=float)
    finish = frame["finish_s"].to_numpy(dtype=float)
    # A job that never finished (or has no label) never becomes history: its use
    # is "known" only after every submission of the log.
    never = float(np.nanmax(frame["submit_s"].to_numpy(dtype=float))) + 1.0
    known = np.where(np.isfinite(finish) & np.isfinite(used), finish, never)
    request = frame[REQUEST_OF[target]].to_numpy(dtype=float)
    given = np.isfinite(request) & (request > 0)
    procs = frame["procs"].to_numpy(dtype=float)
    x = np.where(given, request, np.where(np.isfinite(procs), procs, 1.0))
    out = {}
    for method in PEER_METHODS:
        first, retry = peer_requests(
            method,
            wf.task_key,
            frame["submit_s"].to_numpy(dtype=float),
            known,
            np.where(np.isfinite(used), used, 0.0),
            np.where(given, request, np.inf),
            x,
        )
        out[method] = (first[run.rows], retry[run.rows])
    return out


def _without(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}


def _self_tuning_lines(choices: dict[str, dict[str, Any]]) -> list[str]:
    """Return the report lines saying what each retraining chose for itself.

    ``choices`` maps each period (its first day) to its retraining's choice: the
    days until the next retraining and each target's half-life (None: all
    history weighs the same); see :mod:`pipelines.training.self_tuning`.
    """
    if not choices:
        return []
    cadences = Counter(c["retrain_every_days"] for c in choices.values())
    per_target: dict[str, Counter] = {}
    for choice in choices.values():
        for target, days in choice["half_life_days"].items():
            label = "all" if days is None else f"{days:g} d"
            per_target.setdefault(target, Counter())[label] += 1
    lives = "; ".join(
        f"{t} " + ", ".join(f"{h} x{n}" for h, n in sorted(c.items()))
        for t, c in per_target.items()
    )
    every = ", ".join(f"{d} d x{n}" for d, n in sorted(cadences.items()))
    by_target: dict[str, Counter] = {}
    for choice in choices.values():
        own = (choice.get("cost") or {}).get("target_prices")
        if own is None and choice.get("delay_price") is not None:
            own = {"all targets": choice["delay_price"]}
        for target, price in (own or {}).items():
            by_target.setdefault(target, Counter())[price] += 1
    priced = "; ".join(
        f"{t} " + ", ".join(f"{p:g} x{n}" for p, n in sorted(c.items()))
        for t, c in by_target.items()
    )

    def chosen_in(key: str) -> str:
        """Return how many retrainings chose ``key`` (a list of targets)."""
        found = Counter(
            t for c in choices.values() for t in (c.get("cost") or {}).get(key, [])
        )
        return ", ".join(f"{t} in {n} of {len(choices)}" for t, n in found.items())

    kept, as_scouts = chosen_in("fixed_targets"), chosen_in("scouts_value_targets")
    early = early_remeasure_retrainings(choices)
    return [
        f"- self-tuning: {len(choices)} retrainings; days to the next one chosen: "
        f"{every}",
        f"- self-tuning: half-life of the training weights chosen: {lives}",
        f"- self-tuning: delay price chosen per target (core-hours per core-hour "
        f"of delay; replay against scouts on the validation part, "
        f"docs/decisions.md): {priced or 'none'}",
        f"- self-tuning: values written ...Fixed (kept through PanDA's "
        f"re-measurement): {kept or 'none'}",
        f"- self-tuning: the scouts' own value written (no price did better on "
        f"the validation part; the task still starts at once): "
        f"{as_scouts or 'none'}",
        f"- self-tuning: the marked tasks re-measured after 3 settled jobs (the "
        f"early re-measurement, docs/decisions.md): in {early} of {len(choices)}",
    ]


def _production_summary(run: TargetRun) -> dict[str, Any]:
    """Return what the production decision did: coverage, experts followed, tails."""
    applied = run.applied[PRODUCTION]
    followed = run.followed
    counts = np.bincount(followed[followed >= 0], minlength=len(EXPERTS))
    total = max(int(counts.sum()), 1)
    return {
        "coverage": float(applied.mean()) if applied.size else 0.0,
        "followed": {n: float(c / total) for n, c in zip(EXPERTS, counts, strict=True)},
        "combination": run.combination,
        "tails": tail_misses(run),
    }


def tail_misses(run: TargetRun) -> dict[str, float]:
    """Return why the production decision missed top-class tasks, and what it cost.

    A top-class task predicted lower is a *miss*. It is the model's own miss when
    the model alone put it lower too, else the combination's (it followed a rule
    out of the model's top class). Only a miss that was applied is *written low*
    (its jobs start with too little); the others kept their scouts.
    """
    top = run.bins.n_classes - 1
    is_top = run.y_true == top
    n_top = int(is_top.sum())
    if n_top == 0:
        return {"top_tasks": 0}
    missed = is_top & (run.predicted[PRODUCTION] < top)
    model_missed = missed & (run.predicted["model:xgboost"] < top)
    written = missed & run.applied[PRODUCTION]
    return {
        "top_tasks": n_top,
        "missed": float(missed.sum() / n_top),
        "missed_by_model": float(model_missed.sum() / n_top),
        "missed_by_combination": float((missed & ~model_missed).sum() / n_top),
        "written_low": float(written.sum() / n_top),
    }


def _describe(combination: dict[str, Any]) -> str:
    """Return one combination setting in words (see CombinationParams)."""
    if not combination:
        return "model alone"
    record = "per-class recall" if combination["balanced"] else "accuracy"
    return (
        f"decay {combination['decay']}, key {combination['key']}, "
        f"min {combination['min_record']}, margin {combination['margin']:.0%}, "
        f"{record}"
    )


def _production_lines(summary: dict[str, Any]) -> list[str]:
    """Return the report lines of a :func:`_production_summary`."""
    followed = ", ".join(f"{n} {v:.0%}" for n, v in summary["followed"].items())
    chosen = {p: _describe(c) for p, c in summary["combination"].items()}
    return [
        f"- production decision: {summary['coverage']:.1%} of the tasks skip their "
        "scouts (applied); the rest keep them",
        f"- experts followed: {followed}",
        f"- combination chosen per period: {json.dumps(chosen)}",
        *_tail_lines(summary["tails"]),
    ]


def _tail_lines(tails: dict[str, float]) -> list[str]:
    """Return the report line stating why top-class tasks were missed."""
    if not tails.get("top_tasks"):
        return ["- tails: no top-class task in the test part"]
    return [
        f"- tails: {tails['missed']:.1%} of the {tails['top_tasks']} top-class tasks "
        f"were predicted lower ({tails['missed_by_model']:.1%} by the model itself, "
        f"{tails['missed_by_combination']:.1%} by the combination following a rule "
        f"out of the model's top class); {tails['written_low']:.1%} were written "
        "low, the rest kept their scouts"
    ]


def _lead_interval(
    frame: pd.DataFrame, run: TargetRun, scores: dict[str, dict[str, float]]
) -> MarginInterval | None:
    """Return the best model row's macro-F1 lead over the best baseline, with a
    day-block bootstrap interval (None when either side is missing)."""
    model = best_model(scores)
    baselines = [n for n in scores if n.startswith("baseline:")]
    if model is None or not baselines:
        return None
    baseline = max(
        baselines, key=lambda n: np.nan_to_num(scores[n]["macro_f1"], nan=-1)
    )
    # Rows either side left without a class (-1) are not compared.
    both = (run.predicted[model] >= 0) & (run.predicted[baseline] >= 0)
    if not both.any():
        return None
    days = frame["submit_s"].to_numpy()[run.rows] // 86400
    return margin_interval(
        days[both],
        run.y_true[both],
        run.predicted[model][both],
        run.predicted[baseline][both],
        run.bins.n_classes,
        names=(model, baseline),
    )


def write_outputs(
    result: BenchmarkResult, out_dir: Path, json_path: Path | None = None
) -> list[Path]:
    """Write report.md, full.json and the log's figures into ``out_dir`` (and the
    documented JSON); return the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "report.md", out_dir / "full.json"]
    written[0].write_text(result.report + "\n")
    full = {
        **result.to_json(),
        "full_scores": result.scores,
        "replay": result.replay,
        "replay_difference": result.replay_difference,
        "hindsight": result.hindsight,
        "not_available": result.not_available,
        "notes": result.notes,
        "goal": {t: goal_summary(s) for t, s in result.scores.items()},
        "macro_f1_lead": result.margins,
        "production": result.production,
        "calibration": result.calibration,
        "reliability": result.reliability,
    }
    text = json.dumps(full, indent=2, default=str)
    written[1].write_text(text)
    # The report and full.json are on disk before anything is drawn; the figures
    # are drawn from full.json's text, as the figure commands read it.
    figures = write_figures(json.loads(text), written[1])
    if figures:
        with written[0].open("a") as report:
            report.write("\n### Figures\n")
            report.writelines(f"\n![{f.stem}]({f.name})\n" for f in figures)
    written += figures
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result.to_json(), indent=2, default=str))
        written.append(json_path)
    return written


def write_figures(full: dict[str, Any], full_json: Path) -> list[Path]:
    """Draw the log's Pareto and reliability figures next to its ``full_json``.

    ``pareto.png`` (:mod:`~pipelines.evaluation.trace.pareto`) where a target
    was replayed, ``reliability.png``
    (:mod:`~pipelines.evaluation.trace.reliability`) where one was calibrated: the
    pictures of docs/evaluation.md for this one log, so whoever benchmarks a log
    of their own sees them without another command. Returns the files drawn.
    """
    from pipelines.evaluation.trace import pareto, reliability
    from pipelines.evaluation.trace.full_json import log_name

    name = log_name(full, full_json)
    folder = full_json.parent
    drawn = []
    if any(full.get("replay", {}).values()):
        drawn.append(pareto.draw_log(full, folder / "pareto.png", name))
    if any(full.get("reliability", {}).values()):
        drawn.append(reliability.draw([(name, full)], folder / "reliability.png"))
    return drawn


def _metric_name(strategy: str) -> str:
    """Return a replay strategy as an MLflow metric name part, one per strategy.

    ``peer (tovar)`` -> ``peer.tovar``.
    """
    cleaned = strategy.replace(" (", ".").replace(")", "").replace(":", ".")
    return cleaned.replace(" ", "_")


def log_to_mlflow(settings: Any, result: BenchmarkResult, files: list[Path]) -> str:
    """Log one MLflow run with the split as parameters and every figure as a metric."""
    from model_registry.tracking import (
        disable_mlflow_telemetry,
        log_metrics,
        log_params,
        start_training_run,
    )

    disable_mlflow_telemetry()  # before the first import of MLflow
    import mlflow

    with start_training_run(
        settings,
        TRACES_EXPERIMENT,
        run_name=result.file,
        tags={"trace.file": result.file},
    ) as run:
        log_params(
            {
                "file": result.file,
                **{k: v for k, v in result.split.items() if k != "test_periods"},
            }
        )
        metrics: dict[str, float] = {}
        for target, per_name in result.scores.items():
            for name, scores in per_name.items():
                for key, value in scores.items():
                    metrics[f"{target}.{name.replace(':', '.')}.{key}"] = value
        for target, per_name in result.calibration.items():
            for name, scores in per_name.items():
                for key, value in scores.items():
                    metrics[f"{target}.{name.replace(':', '.')}.{key}"] = value
        for target, outcomes in result.replay.items():
            for o in outcomes:
                for key, value in o.items():
                    if isinstance(value, float):
                        strategy = _metric_name(o["strategy"])
                        metrics[f"replay.{target}.{strategy}.{key}"] = value
        log_metrics(metrics)
        for path in files:
            mlflow.log_artifact(str(path), "benchmark")
        return str(run.info.run_id)
