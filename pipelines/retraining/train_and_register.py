"""Runner: read history, train, report, log to MLflow, register, gate the champion.

The thin wiring around the pure :func:`pipelines.training.train.train`: the only place
where training touches the database, files and MLflow. A run that fails midway leaves
the registry as it was (the new version is registered only after everything else
succeeded, and aliases move last).
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from model_registry.gate import (
    GateEvidence,
    GateThresholds,
)
from model_registry.promotion import (
    GateDecision,
    promote_if_not_worse,
)
from model_registry.registry import ModelVersionInfo, register_bundle
from model_registry.replay_table import Replay, evidence_replay, replay_metrics
from model_registry.tracking import (
    disable_mlflow_telemetry,
    log_feature_schema,
    log_metrics,
    log_params,
    log_report_dir,
    log_training_input,
    mlflow_client,
    start_training_run,
)
from panda_predictor.bins_file import bins_from_settings
from panda_predictor.core.bins import BinSet
from panda_predictor.db.engine import make_engine
from panda_predictor.serving.bundle import save_bundle
from panda_predictor.settings import Settings
from pipelines.monitoring.drift import REFERENCE_FILE, build_reference
from pipelines.retraining.cadence import cadence_tags
from pipelines.retraining.gate_evidence import gate_evidence
from pipelines.training.config import TrainingConfig
from pipelines.training.dataset import LabelledHistory, read_labelled_history
from pipelines.training.report import write_report
from pipelines.training.train import (
    TrainingResult,
    gate_metrics,
    served_model,
    train,
    training_parts,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSummary:
    """What a training run did, for the CLI and the demo."""

    run_id: str
    version: ModelVersionInfo
    gate: GateDecision
    report: Path
    metrics: dict[str, float]
    served_kinds: dict[str, str]
    champion_metrics: dict[str, float] | None = None
    evidence: GateEvidence | None = None


def _report(
    result: TrainingResult,
    out_dir: Path,
    extra: dict[str, Any],
    replay: Replay | None = None,
) -> Path:
    evaluations = {k: r.evaluation for k, r in result.kinds.items() if r.evaluation}
    if len(result.kinds) > 1:
        evaluations["served (best kind per target)"] = result.served
    tails = {
        k: {t: rule.report_ for t, rule in r.rules.items()}
        for k, r in result.kinds.items()
    }
    # The prices get their own section: each candidate's figures are a table.
    meta = {k: v for k, v in result.split_info.items() if k != "cost"}
    meta = {
        **meta,
        **extra,
        "served kinds": ", ".join(f"{t}: {k}" for t, k in result.served_kinds.items()),
        "fit seconds": ", ".join(
            f"{k}: {r.fit_seconds:.1f}" for k, r in result.kinds.items()
        ),
    }
    return write_report(
        out_dir,
        evaluations,
        tails,
        result.coverage,
        metadata=meta,
        title="panda-predictor training report",
        served_kinds=result.served_kinds,
        validation_f1={k: r.val_macro_f1 for k, r in result.kinds.items()},
        calibration=result.calibration,
        replay=replay,
        prices=result.split_info.get("cost"),
        calibrators=result.bundle.calibrators,
    )


def _dataset_name(
    history: LabelledHistory, since: datetime | None, until: datetime | None
) -> str:
    """Return the training window's name: the asked window, else the data's span."""
    dates = history.frame["creationdate"]
    first = since or (dates.min() if len(dates) else None)
    last = until or (dates.max() if len(dates) else None)
    if first is None or last is None:
        return "labelled history (empty)"
    return f"labelled history {first:%Y-%m-%d}..{last:%Y-%m-%d}"


def window_params(since: datetime | None, until: datetime | None) -> dict[str, str]:
    """Return the window bounds as parameters (empty when the whole history is used)."""
    window = {}
    if since is not None:
        window["window_since"] = since.isoformat()
    if until is not None:
        window["window_until"] = until.isoformat()
    return window


def train_and_register(
    settings: Settings,
    config: TrainingConfig | None = None,
    progress: bool = True,
    report_dir: Path | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    bins: BinSet | None = None,
    version_tags: dict[str, str] | None = None,
    history: LabelledHistory | None = None,
    gate_thresholds: GateThresholds | None = None,
) -> RunSummary:
    """Train on the configured database and register the result (gated champion).

    The gate judges the model trained on the configured split; the version
    registered is that configuration fitted one part later
    (:func:`pipelines.training.train.served_model`), whose trees reach the newest
    tasks the gate held out, with the gated model's figures.

    Parameters
    ----------
    settings, config:
        Where to read and register, and what to train.
    progress, report_dir:
        Progress bars; folder of the report (default: ``<home>/reports/train-*``).
    since, until:
        Only tasks created in ``[since, until)`` (the retraining window).
    bins:
        Classes to train on; default: the configured bins file.
    version_tags:
        Extra tags of the registered version (set before the gate moves aliases).
    history:
        Already read labelled history (skips reading the database).
    gate_thresholds:
        How much worse than the champion the new bundle may be (default: the
        gate's). The gate also requires beating the floors (majority class, best
        recency rule) and the tail recall target ``config.recall_target``; an
        incomparable champion is replaced only if
        ``settings.gate_promote_incomparable``.
    """
    # MLflow (and the pyfunc module, which imports it) only now, after its
    # telemetry is off: importing this module must not start MLflow's.
    disable_mlflow_telemetry()
    bins = bins or bins_from_settings(settings)
    config = config or TrainingConfig()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report_dir = report_dir or settings.home / "reports" / f"train-{stamp}"
    # The run spans reading and fitting, so MLflow shows how long training took.
    with start_training_run(settings, run_name=f"train-{stamp}") as run:
        if history is None:
            history = _read_history(settings, since, until, progress)
        log_training_input(history.frame, _dataset_name(history, since, until))
        log_params(
            {
                "config": asdict(config),
                "bins_version": bins.version,
                **window_params(since, until),
            }
        )
        parts = training_parts(history, bins, config)
        result = train(history, bins, config, parts, progress=progress)
        _log_result(result, bins)
        # Scored before registering: the new version must not be its own champion.
        evidence = gate_evidence(settings, result, history, config.recall_target)
        replay = evidence_replay(evidence)
        log_metrics(replay_metrics(replay))
        served = served_model(history, bins, config, parts, result, progress)
        registered = _registered_params(result, served)
        log_params(registered)
        report = _report(
            result,
            report_dir,
            {"mlflow run": run.info.run_id, **registered},
            replay=replay,
        )
        log_report_dir(report_dir)
        version = _register(settings, served, history, run.info.run_id, stamp)
        trained_until = until or history.frame["creationdate"].max().to_pydatetime()
        cadence = cadence_tags(
            served.split_info.get("retrain_every_days"), trained_until
        )
        _tag_version(settings, version, {**cadence, **(version_tags or {})})
        gate = promote_if_not_worse(
            settings,
            version.version,
            evidence,
            gate_thresholds or GateThresholds.from_settings(settings),
            promote_incomparable=settings.gate_promote_incomparable,
        )
    _write_gate(report_dir, version, gate, evidence)
    return RunSummary(
        run.info.run_id,
        version,
        gate,
        report,
        served.bundle.metrics,
        served.served_kinds,
        dict(evidence.champion) if evidence.champion is not None else None,
        evidence,
    )


def _registered_params(gated: TrainingResult, served: TrainingResult) -> dict[str, str]:
    """Return what the registered model was fitted on, next to the gated one."""
    if served is gated:
        return {"registered_model": "the gated model"}
    return {
        "registered_model": "the gated configuration fitted again one part later",
        "registered_train_period": str(served.split_info["train_period"]),
        "registered_train_rows": str(served.split_info["train_rows"]),
        "registered_validation_rows": str(served.split_info["val_rows"]),
    }


def _read_history(
    settings: Settings,
    since: datetime | None,
    until: datetime | None,
    progress: bool,
) -> LabelledHistory:
    """Read the labelled tasks created in ``[since, until)`` from the database."""
    engine = make_engine(settings)
    history = read_labelled_history(
        engine, settings, progress=progress, since=since, until=until
    )
    engine.dispose()
    return history


def _log_result(result: TrainingResult, bins: BinSet) -> None:
    """Log what the training chose and scored to the active MLflow run."""
    import mlflow

    log_params(
        {"schema_hash": result.bundle.features.schema_hash_, **result.split_info}
    )
    for kind, res in result.kinds.items():
        if res.evaluation is not None:
            log_metrics(
                {f"{kind}.{k}": v for k, v in gate_metrics(res.evaluation).items()}
            )
    # The calibration errors of the served distribution (test part).
    log_metrics(
        {
            k: v
            for k, v in result.bundle.metrics.items()
            if "ece" in k.rsplit(".", 1)[-1]
        }
    )
    log_feature_schema(result.bundle.features.to_dict())
    mlflow.log_dict(bins.to_dict(), "config/bins.yaml")


def _register(
    settings: Settings,
    result: TrainingResult,
    history: LabelledHistory,
    run_id: str,
    stamp: str,
) -> ModelVersionInfo:
    """Register the bundle, with its drift reference, as a new pyfunc model version."""
    from panda_predictor.serving.pyfunc import (
        BUNDLE_SUBDIR,
        input_example,
        save_pyfunc_model,
    )

    with tempfile.TemporaryDirectory() as tmp:
        bundle_dir = save_bundle(result.bundle, Path(tmp) / "bundle")
        (bundle_dir / REFERENCE_FILE).write_text(
            json.dumps(build_reference(history, result))
        )
        model_dir = save_pyfunc_model(
            bundle_dir,
            Path(tmp) / "model",
            input_example(history.frame),
            settings.model_name,
        )
        return register_bundle(
            settings,
            model_dir,
            run_id,
            result.bundle.metrics,
            description=f"trained {stamp}",
            bundle_path=BUNDLE_SUBDIR,
        )


def _tag_version(
    settings: Settings, version: ModelVersionInfo, tags: dict[str, str]
) -> None:
    """Set the version's tags (before the gate moves any alias to it)."""
    client = mlflow_client(settings)
    for key, value in tags.items():
        client.set_model_version_tag(
            settings.model_name, str(version.version), key, value
        )


def _write_gate(
    report_dir: Path,
    version: ModelVersionInfo,
    gate: GateDecision,
    evidence: GateEvidence,
) -> None:
    """Write the gate's verdict next to the report (the monitoring page reads it)."""
    (report_dir / "gate.json").write_text(
        json.dumps(
            {
                "version": version.version,
                "decision": gate.to_dict(),
                "verdicts": gate.describe(),
                "evidence": asdict(evidence),
            },
            default=str,
            indent=1,
        )
    )


def metrics_table(metrics: dict[str, float]) -> pd.DataFrame:
    """Return the headline metrics per target as a small table (for the CLI)."""
    rows = []
    for target in ("ramcount", "cputime", "iointensity", "walltime"):
        if f"{target}.accuracy" in metrics:
            rows.append(
                {
                    "target": target,
                    "accuracy": metrics[f"{target}.accuracy"],
                    "macro_f1": metrics[f"{target}.macro_f1"],
                    "tail_recall": metrics[f"{target}.tail_recall"],
                    "under_alloc": metrics[f"{target}.under_allocation"],
                    "ece": metrics.get(f"{target}.ece", float("nan")),
                }
            )
    return pd.DataFrame(rows)
