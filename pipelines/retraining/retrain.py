"""Retraining on the deployment's own cadence: gated promotion, idempotent.

Wraps :func:`pipelines.retraining.train_and_register.train_and_register` (which
trains, evaluates the
challenger and the current champion on the same newest held-out tasks, registers
and gates). This module adds what a timer-driven run needs:

* when to run: with ``cadence="auto"`` (the default) the run trains only when the
  newest trained data is as old as the cadence training chose from the deployment's
  own past (:mod:`pipelines.retraining.cadence`), so a daily timer retrains weekly,
  monthly or quarterly as the deployment's history asks; otherwise it records
  ``skipped_not_due``. ``cadence="monthly"`` trains on every run (a monthly timer);
* the window: ``window_months`` calendar months before the start of today (auto) or
  of the current month (monthly), so every run of one day (month) sees the same data;
* a *fingerprint* of window, data, parameters, bins and code version, stored as the
  version tag ``retrain.fingerprint``; a version with the same fingerprint whose run
  completed (tag ``retrain.status=complete``) makes a rerun a no-op, so running twice
  in a month never registers two equal models;
* crash safety: aliases move only in the gate, after everything else succeeded; a
  run killed before leaves the champion untouched and at most an alias-less version
  tagged ``retrain.status=registered``, which a rerun ignores and replaces;
* ``if_drift``: retrain only when the drift check finds drift;
* a decision log (``<home>/retrain/decisions.jsonl``, see
  :mod:`pipelines.monitoring.retrain_log`), the comparison logged to the training
  run in MLflow, and a readable summary page with plots.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from model_registry.gate import GateThresholds
from panda_predictor import __version__
from panda_predictor.bins_file import bins_from_settings
from panda_predictor.core.bins import BinSet, fit_bins
from panda_predictor.core.domain.targets import TARGET_NAMES
from panda_predictor.core.features.pipeline import FEATURE_PIPELINE_VERSION
from panda_predictor.settings import Settings
from pipelines.monitoring.retrain_log import append_decision
from pipelines.retraining.cadence import check_due, registered_versions
from pipelines.training.config import TrainingConfig
from pipelines.training.dataset import LabelledHistory

log = logging.getLogger(__name__)

FINGERPRINT_TAG = "retrain.fingerprint"
STATUS_TAG = "retrain.status"
WINDOW_TAG = "retrain.window"

PROMOTED = "promoted"
REFUSED = "refused"
SKIPPED_DUPLICATE = "skipped_duplicate"
SKIPPED_NO_DRIFT = "skipped_no_drift"
SKIPPED_NOT_DUE = "skipped_not_due"

#: Cadences of ``RetrainConfig.cadence``: the one training chose, or every month.
AUTO = "auto"
MONTHLY = "monthly"
CADENCES = (AUTO, MONTHLY)


@dataclass(frozen=True)
class RetrainConfig:
    """How a retraining run chooses its data and whether it runs at all.

    Parameters
    ----------
    window_months:
        Calendar months of history before the window's end (default 12).
    cadence:
        ``"auto"``: train only when the cadence the models chose is due (run the
        command daily); ``"monthly"``: train on every run, on month-aligned windows.
    refit_bins:
        Refit the class edges on the window's labels instead of the bins file.
    if_drift:
        Run only when the drift check detects drift (then whatever the cadence:
        drift makes a retraining due early).
    drift_days:
        Window of recent tasks the ``if_drift`` check looks at.
    training:
        What to train (both model kinds by default).
    gate:
        How much worse than the champion the challenger may be on the same test
        tasks; default: the gate's own defaults. On small test sets, loosen it to
        the sampling noise (a 200-task test set moves rates by several points).
    """

    window_months: int = 12
    cadence: str = AUTO
    refit_bins: bool = False
    if_drift: bool = False
    training: TrainingConfig = field(default_factory=TrainingConfig)
    gate: GateThresholds | None = None
    drift_days: int = 30

    def __post_init__(self) -> None:
        if not isinstance(self.window_months, int) or self.window_months < 1:
            raise ValueError(
                f"The 'window_months' field must be a positive integer. Got "
                f"{self.window_months!r} instead."
            )
        if self.cadence not in CADENCES:
            raise ValueError(
                f"The 'cadence' field must be one of {', '.join(CADENCES)}. Got "
                f"{self.cadence!r} instead."
            )


@dataclass
class RetrainOutcome:
    """What one retraining run decided, and where to read more."""

    status: str
    since: datetime
    until: datetime
    fingerprint: str | None = None
    version: int | None = None
    champion_version: int | None = None
    reason: str = ""
    challenger_metrics: dict[str, float] = field(default_factory=dict)
    champion_metrics: dict[str, float] | None = None
    report: Path | None = None
    run_id: str | None = None
    #: The gate's line per metric: challenger, champion, floor, tolerance, noise.
    verdicts: tuple[str, ...] = ()
    #: The same verdicts as a table: champion, challenger, difference, tolerance.
    gate_table: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready record (the decision log line)."""
        out = asdict(self)
        out.update(
            since=self.since.isoformat(),
            until=self.until.isoformat(),
            report=str(self.report) if self.report else None,
        )
        return out


def _months_before(until: datetime, months: int) -> datetime:
    """Return the same day ``months`` calendar months earlier (clipped to the
    month's last day: 31 March minus one month is 28 or 29 February)."""
    index = until.year * 12 + until.month - 1 - months
    year, month = index // 12, index % 12 + 1
    return datetime(year, month, min(until.day, calendar.monthrange(year, month)[1]))


def month_window(now: datetime, months: int) -> tuple[datetime, datetime]:
    """Return ``[since, until)``: the ``months`` whole months before ``now``'s month."""
    until = datetime(now.year, now.month, 1)
    return _months_before(until, months), until


def day_window(now: datetime, months: int) -> tuple[datetime, datetime]:
    """Return ``[since, until)``: ``months`` calendar months before ``now``'s day."""
    until = datetime(now.year, now.month, now.day)
    return _months_before(until, months), until


def retrain_window(now: datetime, config: RetrainConfig) -> tuple[datetime, datetime]:
    """Return the history window of a run at ``now`` under ``config``'s cadence."""
    if config.cadence == MONTHLY:
        return month_window(now, config.window_months)
    return day_window(now, config.window_months)


def fingerprint(
    since: datetime,
    until: datetime,
    history: LabelledHistory,
    config: RetrainConfig,
    bins: BinSet,
) -> str:
    """Return a short hash of window, data, parameters, bins and code version."""
    frame = history.frame
    payload = {
        "window": [since.isoformat(), until.isoformat()],
        "rows": int(len(frame)),
        "max_task": int(frame["jeditaskid"].max()) if len(frame) else 0,
        "training": asdict(config.training),
        "refit_bins": config.refit_bins,
        "gate": asdict(config.gate) if config.gate else None,
        "bins": bins.to_dict(),
        "code": [__version__, FEATURE_PIPELINE_VERSION],
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def completed_version(settings: Settings, fp: str) -> int | None:
    """Return the version whose completed retraining run had fingerprint ``fp``."""
    for mv in registered_versions(settings):
        tags = mv.tags or {}
        if tags.get(FINGERPRINT_TAG) == fp and tags.get(STATUS_TAG) == "complete":
            return int(mv.version)
    return None


def _bins_for(
    settings: Settings, history: LabelledHistory, config: RetrainConfig, until: datetime
) -> BinSet:
    configured = bins_from_settings(settings)
    if not config.refit_bins:
        return configured
    values = {t: history.frame[t].to_numpy(dtype=float) for t in TARGET_NAMES}
    n_classes = {t: configured[t].n_classes for t in TARGET_NAMES}
    return fit_bins(values, n_classes=n_classes, version=f"refit-{until:%Y%m}")


def _record(settings: Settings, outcome: RetrainOutcome) -> None:
    append_decision(settings, outcome.to_dict())
    version = f" (version {outcome.version})" if outcome.version else ""
    log.info(
        "retrain %s..%s: %s%s %s",
        outcome.since.date(),
        outcome.until.date(),
        outcome.status,
        version,
        outcome.reason,
    )


def _log_comparison(settings: Settings, outcome: RetrainOutcome) -> None:
    """Add the champion's figures and the decision to the training run in MLflow."""
    from model_registry.tracking import mlflow_client

    if outcome.run_id is None:
        return
    client = mlflow_client(settings)
    for key, value in (outcome.champion_metrics or {}).items():
        if value == value:  # skip NaN
            client.log_metric(outcome.run_id, f"champion.{key}", float(value))
    client.set_tag(outcome.run_id, "retrain.decision", outcome.status)
    client.set_tag(outcome.run_id, "retrain.reason", outcome.reason[:5000])
    client.set_tag(outcome.run_id, FINGERPRINT_TAG, outcome.fingerprint or "")


def _drift_says_no(settings: Settings, now: datetime, days: int) -> str | None:
    """Return why to skip (no drift), or None to go on (drift, or no champion)."""
    from model_registry.registry import NoChampionError
    from pipelines.monitoring.drift import check_drift

    try:
        run = check_drift(settings, until=now, days=days)
    except NoChampionError:
        return None
    if run.result.drifted:
        return None
    return f"no drift detected ({run.result.n_tasks} recent tasks)"


def run_retrain(
    settings: Settings,
    config: RetrainConfig = RetrainConfig(),
    now: datetime | None = None,
    report_dir: Path | None = None,
    progress: bool = False,
) -> RetrainOutcome:
    """Retrain when due on the recent window and promote only if not worse.

    Parameters
    ----------
    settings:
        Settings naming the database, registry and home folder.
    config:
        Window, bins refit, drift condition and training parameters.
    now:
        Current time (defaults to now, UTC); the window ends at its day's start
        (``cadence="auto"``) or its month's start (``"monthly"``).
    report_dir:
        Folder of the summary page; default ``<home>/reports/retrain-<month>-*``.
    progress:
        Show progress bars.
    """
    from pipelines.monitoring.report import write_retrain_summary

    now = now or datetime.now(UTC).replace(tzinfo=None)
    since, until = retrain_window(now, config)
    skip = _skip_reason(settings, config, now)
    if skip is not None:
        outcome = RetrainOutcome(skip[0], since, until, reason=skip[1])
        _record(settings, outcome)
        return outcome
    history = _read_window(settings, since, until, progress)
    bins = _bins_for(settings, history, config, until)
    fp = fingerprint(since, until, history, config, bins)
    existing = completed_version(settings, fp)
    if existing is not None:
        outcome = RetrainOutcome(
            SKIPPED_DUPLICATE,
            since,
            until,
            fp,
            existing,
            reason=f"version {existing} was trained on the same window, data, "
            "parameters and code",
        )
        _record(settings, outcome)
        return outcome
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    report_dir = (
        report_dir or settings.home / "reports" / f"retrain-{until:%Y%m%d}-{stamp}"
    )
    outcome = _train_and_gate(
        settings, config, history, bins, fp, since, until, report_dir, progress
    )
    from model_registry.tracking import mlflow_client

    mlflow_client(settings).set_model_version_tag(
        settings.model_name, str(outcome.version), STATUS_TAG, "complete"
    )
    _log_comparison(settings, outcome)
    outcome = replace(outcome, report=write_retrain_summary(report_dir, outcome))
    _record(settings, outcome)
    return outcome


def _skip_reason(
    settings: Settings, config: RetrainConfig, now: datetime
) -> tuple[str, str] | None:
    """Return ``(status, reason)`` when no retraining is due now, else None."""
    if config.cadence == AUTO and not config.if_drift:  # drift makes it due early
        due = check_due(settings, now)
        if not due.due:
            return SKIPPED_NOT_DUE, due.reason
    if config.if_drift:
        why = _drift_says_no(settings, now, config.drift_days)
        if why is not None:
            return SKIPPED_NO_DRIFT, why
    return None


def _read_window(
    settings: Settings, since: datetime, until: datetime, progress: bool
) -> LabelledHistory:
    """Read the labelled tasks created in ``[since, until)``."""
    from panda_predictor.db.engine import make_engine
    from pipelines.training.dataset import read_labelled_history

    engine = make_engine(settings)
    try:
        return read_labelled_history(
            engine, settings, progress=progress, since=since, until=until
        )
    finally:
        engine.dispose()


def _train_and_gate(
    settings: Settings,
    config: RetrainConfig,
    history: LabelledHistory,
    bins: BinSet,
    fp: str,
    since: datetime,
    until: datetime,
    report_dir: Path,
    progress: bool,
) -> RetrainOutcome:
    """Train on the window, register the version (tagged) and let the gate judge it."""
    from pipelines.retraining.train_and_register import train_and_register

    summary = train_and_register(
        settings,
        config.training,
        progress=progress,
        report_dir=report_dir,
        since=since,
        until=until,
        bins=bins,
        history=history,
        gate_thresholds=config.gate,
        version_tags={
            FINGERPRINT_TAG: fp,
            STATUS_TAG: "registered",
            WINDOW_TAG: f"{since:%Y-%m-%d}..{until:%Y-%m-%d}",
        },
    )
    gate = summary.gate
    return RetrainOutcome(
        PROMOTED if gate.promoted else REFUSED,
        since,
        until,
        fp,
        summary.version.version,
        gate.champion_version,
        gate.reason,
        dict(summary.metrics),
        summary.champion_metrics,
        report_dir,
        summary.run_id,
        tuple(v.describe() for v in gate.verdicts),
        tuple(gate.table()[1:]),
    )
