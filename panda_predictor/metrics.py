"""Prometheus metrics shared by the hooks, the refiner, the drift check and the service.

Every series lives in prometheus_client's default registry. A long-lived process
exposes it on ``/metrics`` (``serve``, or ``hook --watch --metrics-port``); a short
one (``hook --once``) writes it to a node-exporter textfile at the end of its pass
(:func:`write_textfile`), so its counts outlive the process. The drift gauges are set
from the last drift run *recorded in the database* (:func:`publish_drift_run`), so
the service shows them long after the ``drift`` process ended.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, Counter, Gauge, start_http_server
from prometheus_client import write_to_textfile as _write_to_textfile

from panda_predictor.errors import OptionError

TASKS = Counter(
    "panda_predictor_tasks_total",
    "Tasks handled by a hook, by decision.",
    ["hook", "decision"],
)
FALLBACKS = Counter(
    "panda_predictor_fallbacks_total",
    "Times a hook failed open (task left untouched, scouts run), by reason.",
    ["hook", "reason"],
)
MODEL_VERSION = Gauge(
    "panda_predictor_model_version",
    "Version of the champion model in use.",
    ["model_name"],
)
HOOK_PASSES = Counter(
    "panda_predictor_hook_passes_total",
    "Passes of a hook over the eligible tasks, by outcome (ok, failed).",
    ["hook", "outcome"],
)
LAST_PASS = Gauge(
    "panda_predictor_hook_last_pass_timestamp_seconds",
    "Unix time the last pass of a hook ended (ok or failed open).",
    ["hook"],
)
KILL_SWITCH_ON = Gauge(
    "panda_predictor_kill_switch_on",
    "1 if the kill switch (mode legacy or kill_switch_file) held at the last pass.",
    ["hook"],
)
KILL_SWITCH_PASSES = Counter(
    "panda_predictor_kill_switch_passes_total",
    "Hook passes (or refiner calls) run while the kill switch was on.",
    ["hook"],
)
EARLY_REMEASURES = Counter(
    "panda_predictor_early_remeasures_total",
    "Tasks a hook asked PanDA to re-measure after their first finished jobs.",
    ["hook"],
)
KILL_SWITCH_TASKS = Counter(
    "panda_predictor_kill_switch_tasks_total",
    "Tasks left to their scouts because the kill switch was on.",
    ["hook"],
)

DRIFT_PSI = Gauge(
    "panda_predictor_drift_psi",
    "PSI of a task feature in the last recorded drift run.",
    ["feature"],
)
DRIFT_THRESHOLD = Gauge(
    "panda_predictor_drift_psi_threshold",
    "PSI above which the feature drifted (threshold plus its sampling noise).",
    ["feature"],
)
DRIFT_CAN_ALARM = Gauge(
    "panda_predictor_drift_feature_can_alarm",
    "1 if the feature can raise the drift alarm, 0 if it is reported only.",
    ["feature"],
)
DRIFT_VERDICT = Gauge(
    "panda_predictor_drift_verdict",
    "1 for the verdict of the last recorded drift run, 0 for the others.",
    ["verdict"],
)
DRIFT_DETECTED = Gauge(
    "panda_predictor_drift_detected",
    "1 if the last recorded drift run detected drift, else 0.",
)
DRIFT_LAST_RUN = Gauge(
    "panda_predictor_drift_last_run_timestamp_seconds",
    "Unix time of the last recorded drift run.",
)
DRIFT_UNDER_ALLOCATION = Gauge(
    "panda_predictor_drift_under_allocation",
    "Feedback under-allocation rate of a target in the last recorded drift run.",
    ["target"],
)

#: Decisions a hook counts; declared at start so rates exist from the first scrape.
HOOK_DECISIONS = (
    "applied",
    "kept_scouts",
    "shadow",
    "held_back",
    "moved_by_jedi",
    "locked_by_jedi",
    "malformed_splitrule",
    "stopped_by_kill_switch",
    "error",
)
#: Verdicts of a drift run (see
#: :class:`panda_predictor.core.assess.drift_verdict.DriftResult`).
DRIFT_VERDICTS = ("drift", "no_drift", "too_few_outcomes")


def declare_hook_series(hook: str) -> None:
    """Create the zero-valued series of ``hook`` so alerts see them before any task.

    A rate or an absence alert needs the series to exist; a counter labelled only
    when first incremented would be missing from every scrape of an idle hook.
    """
    for decision in HOOK_DECISIONS:
        TASKS.labels(hook, decision)
    for outcome in ("ok", "failed"):
        HOOK_PASSES.labels(hook, outcome)
    KILL_SWITCH_PASSES.labels(hook)
    KILL_SWITCH_TASKS.labels(hook)
    EARLY_REMEASURES.labels(hook)
    KILL_SWITCH_ON.labels(hook)


def record_pass(hook: str, failed: bool) -> None:
    """Count one finished pass of ``hook`` and stamp its end time."""
    HOOK_PASSES.labels(hook, "failed" if failed else "ok").inc()
    LAST_PASS.labels(hook).set_to_current_time()


def record_kill_switch(hook: str, on: bool) -> None:
    """Record whether the kill switch held for one pass (or one refiner call)."""
    KILL_SWITCH_ON.labels(hook).set(1.0 if on else 0.0)
    if on:
        KILL_SWITCH_PASSES.labels(hook).inc()


def publish_drift_run(run: Mapping[str, Any]) -> None:
    """Set the drift gauges from one recorded drift run.

    Parameters
    ----------
    run:
        A run as :func:`panda_predictor.db.drift_runs.recent_drift_runs` returns it:
        ``run_at``, ``verdict``, ``features`` (name -> psi, threshold, alarm) and
        ``under_allocation`` (target -> rate).
    """
    verdict = str(run["verdict"])
    for name in DRIFT_VERDICTS:
        DRIFT_VERDICT.labels(name).set(1.0 if name == verdict else 0.0)
    DRIFT_DETECTED.set(1.0 if verdict == "drift" else 0.0)
    run_at = run.get("run_at")
    if isinstance(run_at, datetime):
        # Runs are stored in UTC without a zone (as every plugin timestamp).
        stamp = run_at if run_at.tzinfo else run_at.replace(tzinfo=UTC)
        DRIFT_LAST_RUN.set(stamp.timestamp())
    for feature, values in run.get("features", {}).items():
        DRIFT_PSI.labels(feature).set(float(values["psi"]))
        DRIFT_THRESHOLD.labels(feature).set(float(values["threshold"]))
        DRIFT_CAN_ALARM.labels(feature).set(1.0 if values["alarm"] else 0.0)
    for target, rate in run.get("under_allocation", {}).items():
        DRIFT_UNDER_ALLOCATION.labels(target).set(float(rate))


class MetricsOptionError(OptionError):
    """A metrics option (port, textfile path) the operator must fix."""


def serve_metrics(port: int, host: str = "127.0.0.1") -> Any:
    """Serve ``/metrics`` of the default registry on ``host:port`` in a daemon thread.

    Loopback by default: the counts say which tasks a site runs, so exposing them
    on every interface is the operator's explicit choice. Returns the HTTP server
    (``shutdown()`` stops it).
    """
    if not 0 < port < 65536:
        raise MetricsOptionError(
            f"The 'metrics_port' must be between 1 and 65535. Got {port} instead."
        )
    try:
        server, _thread = start_http_server(port, addr=host)
    except OSError as exc:
        raise MetricsOptionError(
            f"The metrics endpoint could not listen on {host}:{port}: {exc.strerror}. "
            "Choose a free port with --metrics-port."
        ) from exc
    return server


def write_textfile(path: Path | str) -> Path:
    """Write every metric to ``path`` for node-exporter's textfile collector.

    Atomic: written to a temporary file beside ``path`` and renamed over it, so the
    collector never reads half a file. The name must end in ``.prom`` (the only
    files the collector reads).
    """
    target = check_textfile_path(path)
    # prometheus_client writes <path>.<pid>.<thread> and os.replace()s it.
    _write_to_textfile(os.fspath(target), REGISTRY)
    return target


def check_textfile_path(path: Path | str) -> Path:
    """Return ``path`` as a Path if node-exporter can collect it, else raise why not."""
    target = Path(path)
    if target.suffix != ".prom":
        raise MetricsOptionError(
            "The 'metrics_textfile' must end in '.prom' (node-exporter reads only "
            f"those). Got {str(target)!r} instead."
        )
    if not target.parent.is_dir():
        raise MetricsOptionError(
            "The 'metrics_textfile' folder must exist (node-exporter's "
            f"--collector.textfile.directory). Got {str(target.parent)!r} instead."
        )
    return target
