"""Runner of the drift check: recent tasks and feedback vs the champion's reference.

Reads the tasks created in a window and the feedback outcomes of a sliding window,
compares them with the ``reference.json`` profile stored in the champion bundle
(written by the training runner), and records the result: a row in the database
table ``pp_drift_run`` (verdict, per-feature PSI/threshold/can-alarm, per-target
under-allocation; the trend the report and the service's ``/metrics`` read), an
MLflow run in the experiment ``panda-predictor-monitoring``, Prometheus gauges in
this process, and a JSON file under ``<home>/monitoring/`` (the HTML report's
former input). The CLI turns the verdict ``drift`` into the exit code.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from prometheus_client import Gauge

from panda_predictor.core.assess.drift import (
    DriftThresholds,
    build_profile,
    class_drift,
    feature_drift,
)
from panda_predictor.core.assess.drift_verdict import DriftResult, performance_drift
from panda_predictor.core.assess.feedback import target_scores
from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.metrics import publish_drift_run
from panda_predictor.settings import Settings

if TYPE_CHECKING:
    import pandas as pd

    from model_registry.cache import ChampionBundle

log = logging.getLogger(__name__)

#: File of the reference profile inside a bundle folder.
REFERENCE_FILE = "reference.json"
MONITORING_EXPERIMENT = "panda-predictor-monitoring"
#: Exit code of ``panda-predictor drift`` when drift is detected.
DRIFT_EXIT_CODE = 3

DRIFT_UNSEEN = Gauge(
    "panda_predictor_drift_unseen_share",
    "Share of recent tasks with a category unseen in training.",
    ["feature"],
)
DRIFT_CLASS_PSI = Gauge(
    "panda_predictor_drift_class_psi",
    "PSI of the predicted classes of a target vs the test data.",
    ["target"],
)
FEEDBACK_ACCURACY = Gauge(
    "panda_predictor_feedback_accuracy",
    "Feedback accuracy of a target (sliding window).",
    ["target"],
)


def build_reference(history: Any, result: Any) -> dict[str, Any]:
    """Return the reference profile of a training run (for ``reference.json``).

    The profile covers every task of the history window the bundle was built and
    tested on (so releases that appeared late in the window count as seen), and the
    distribution of the classes the served models chose on the test tasks.
    """
    predicted = {
        t: result.kinds[k].test_pred[t] for t, k in result.served_kinds.items()
    }
    n_classes = {t: result.bundle.bins[t].n_classes for t in predicted}
    profile = build_profile(history.tasks, predicted, n_classes)
    profile["period"] = result.split_info.get("train_period", "")
    return profile


def thresholds_from(settings: Settings) -> DriftThresholds:
    """Return the drift thresholds of ``settings``."""
    return DriftThresholds(
        psi=settings.drift_psi_threshold,
        unseen_share=settings.drift_unseen_share_threshold,
        under_allocation_factor=settings.drift_under_allocation_factor,
        accuracy_drop=settings.drift_accuracy_drop,
        min_tasks=settings.drift_min_tasks,
    )


@dataclass
class DriftRun:
    """A drift check: its window, model version, result and where it was recorded."""

    since: datetime
    until: datetime
    model_version: int
    result: DriftResult
    json_path: Path
    run_id: str | None
    run_at: datetime = field(
        default_factory=lambda: datetime.now(UTC).replace(tzinfo=None)
    )
    database_id: str | None = None


def run_record(run: DriftRun) -> dict[str, Any]:
    """Return the drift run in the shape ``pp_drift_run`` keeps and the gauges show."""
    result = run.result
    return {
        "run_at": run.run_at,
        "verdict": result.verdict,
        "model_version": str(run.model_version),
        "features": result.feature_figures(),
        "under_allocation": result.under_allocation,
    }


def _publish_gauges(run: DriftRun) -> None:
    result = run.result
    publish_drift_run(run_record(run))
    for f in result.features:
        DRIFT_UNSEEN.labels(feature=f.feature).set(f.unseen_share)
    for target, value in result.classes.items():
        DRIFT_CLASS_PSI.labels(target=target).set(value)
    for p in result.performance:
        if p.n:
            FEEDBACK_ACCURACY.labels(target=p.target).set(p.accuracy)


def _record_in_database(settings: Settings, run: DriftRun) -> str:
    """Keep the run in ``pp_drift_run`` (the trend the report and service read)."""
    from panda_predictor.db.drift_runs import record_drift_run
    from panda_predictor.db.engine import make_engine

    record = run_record(run)
    engine = make_engine(settings)
    try:
        return record_drift_run(
            engine,
            settings,
            verdict=record["verdict"],
            features=record["features"],
            under_allocation=record["under_allocation"],
            model_version=record["model_version"],
            model_name=settings.model_name,
            run_at=run.run_at,
            window=(run.since, run.until),
            n_tasks=run.result.n_tasks,
            n_outcomes=run.result.n_outcomes,
        )
    finally:
        engine.dispose()


def _log_mlflow(settings: Settings, run: DriftRun) -> str:
    from model_registry.tracking import (
        disable_mlflow_telemetry,
        log_metrics,
        start_training_run,
    )

    disable_mlflow_telemetry()  # before the first import of MLflow
    import mlflow

    result = run.result
    metrics: dict[str, float] = {
        "drifted": float(result.drifted),
        "n_tasks": float(result.n_tasks),
    }
    for f in result.features:
        metrics[f"psi.{f.feature}"] = f.psi
        metrics[f"unseen.{f.feature}"] = f.unseen_share
    metrics.update({f"class_psi.{t}": v for t, v in result.classes.items()})
    for p in result.performance:
        if p.n:
            metrics[f"feedback.{p.target}.accuracy"] = p.accuracy
            metrics[f"feedback.{p.target}.under_allocation"] = p.under_allocation
    tags = {
        "model_version": str(run.model_version),
        "drifted": str(result.drifted),
        "window": f"{run.since:%Y-%m-%d}..{run.until:%Y-%m-%d}",
    }
    with start_training_run(
        settings, MONITORING_EXPERIMENT, run_name=f"drift-{run.until:%Y%m%d}", tags=tags
    ) as active:
        log_metrics({k: v for k, v in metrics.items() if np.isfinite(v)})
        mlflow.log_dict(result.to_dict(), "drift.json")
        return str(active.info.run_id)


def check_drift(
    settings: Settings,
    since: datetime | None = None,
    until: datetime | None = None,
    days: int = 30,
    feedback_days: int = 28,
    classify: bool = True,
    record: bool = True,
) -> DriftRun:
    """Compare recent tasks and feedback with the champion's reference profile.

    Parameters
    ----------
    settings:
        Settings naming the database, registry and home folder.
    since, until:
        Window of task creation dates; default: the ``days`` before now.
    days:
        Length of the default window.
    feedback_days:
        Sliding window of feedback outcomes (by prediction time, ending at ``until``).
    classify:
        Also score the predicted-class distribution (runs the champion on the tasks).
    record:
        Keep the run in ``pp_drift_run``, log it to MLflow and write
        ``<home>/monitoring/drift-*.json``.
    """
    from model_registry.cache import load_champion_bundle_dir

    until = until or datetime.now(UTC).replace(tzinfo=None)
    since = since or until - timedelta(days=days)
    champion = load_champion_bundle_dir(settings)
    profile = _reference_profile(champion)
    thresholds = thresholds_from(settings)
    result, outcomes = _recent_drift(
        settings, champion, profile, thresholds, since, until, feedback_days, classify
    )
    if not outcomes.empty:
        outcomes = outcomes[outcomes["model_version"] == str(champion.version)]
    # The bundle's own manifest holds its test figures: no registry call needed,
    # so the check also works from the cached champion when MLflow is down.
    manifest = json.loads((champion.path / "bundle.json").read_text())
    test_metrics = dict(manifest.get("metrics", {}))
    scores = (
        {t: target_scores(outcomes, t) for t in TARGET_NAMES} if len(outcomes) else {}
    )
    result.performance = performance_drift(scores, test_metrics, thresholds)
    out_dir = settings.home / "monitoring"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    json_path = out_dir / f"drift-{stamp}.json"
    run = DriftRun(since, until, champion.version, result, json_path, None)
    _publish_gauges(run)
    if record:
        run.database_id = _record_in_database(settings, run)
        run.run_id = _log_mlflow(settings, run)
        out_dir.mkdir(parents=True, exist_ok=True)
        _write_json(run)
    log.info(
        "drift check %s..%s on version %s: %d tasks, %d outcomes, verdict %s %s",
        since,
        until,
        champion.version,
        result.n_tasks,
        result.n_outcomes,
        result.verdict,
        result.reasons,
    )
    return run


def _reference_profile(champion: ChampionBundle) -> dict[str, Any]:
    """Return the reference profile the champion's training stored in its bundle."""
    from model_registry.registry import RegistryError

    ref_path = champion.path / REFERENCE_FILE
    if not ref_path.is_file():
        # The registry holds a champion this code cannot check: an operator's
        # problem with a named fix, not a bug.
        raise RegistryError(
            f"The champion bundle (version {champion.version}) must hold "
            f"{REFERENCE_FILE} to check drift. Got none in {str(champion.path)!r}: "
            "retrain with this panda-predictor ('panda-predictor retrain')."
        )
    return json.loads(ref_path.read_text())


def _recent_drift(
    settings: Settings,
    champion: ChampionBundle,
    profile: dict[str, Any],
    thresholds: DriftThresholds,
    since: datetime,
    until: datetime,
    feedback_days: int,
    classify: bool,
) -> tuple[DriftResult, pd.DataFrame]:
    """Score the window's tasks against the profile; return it and the feedback.

    The feature drift always; the predicted classes' drift when ``classify`` (runs
    the champion on the tasks, before the expert combination follows any rule).
    """
    from panda_predictor.db.engine import make_engine
    from panda_predictor.db.outcomes import read_created_tasks, read_outcomes
    from panda_predictor.serving.bundle import load_bundle
    from panda_predictor.serving.predictor import Predictor
    from panda_predictor.serving.recent import read_history_frame

    important = tuple(settings.drift_psi_features)
    unseen = tuple(settings.drift_unseen_features)
    engine = make_engine(settings)
    try:
        tasks = read_created_tasks(engine, settings, since, until)
        outcomes = read_outcomes(
            engine, settings, until - timedelta(days=feedback_days), until
        )
        result = DriftResult(
            n_tasks=len(tasks),
            class_psi_limit=thresholds.psi,
            enough_tasks=len(tasks) >= thresholds.min_tasks,
            min_outcomes=thresholds.min_tasks,
        )
        if len(tasks):
            result.features = feature_drift(
                profile, tasks, thresholds, important, unseen
            )
            if classify:
                bundle = load_bundle(champion.path)
                predictor = Predictor(
                    bundle, settings.model_name, str(champion.version)
                )
                history = read_history_frame(engine, settings, now=until)
                # The training profile holds the model's own classes: compare
                # those, before the expert combination follows any rule.
                chosen = predictor.classified(tasks, history).model_chosen
                result.classes = class_drift(profile, chosen)
    finally:
        engine.dispose()
    return result, outcomes


def _write_json(run: DriftRun) -> None:
    """Write the run to ``run.json_path`` (the monitoring report reads the newest)."""
    run.json_path.write_text(
        json.dumps(
            {
                "since": run.since.isoformat(),
                "until": run.until.isoformat(),
                "model_version": run.model_version,
                "mlflow_run": run.run_id,
                **run.result.to_dict(),
            },
            indent=1,
            default=float,
        )
    )
