"""The database submit hook: predict tasks waiting for scouts and write back.

One pass finds tasks that are ``defined`` or ``ready``, still scheduled for scouts
(``US=`` in SPLITRULE) and not yet audited, predicts them with the champion model and,
in one transaction per batch, writes the values (and removes the scout rule) where
the decision is ``applied``, plus an audit row for every task. Rows are locked with
``FOR UPDATE SKIP LOCKED`` where the database has it, so several hooks can run.

The hook fails open: a missing model, an unreachable registry or database, or any
other failure leaves the tasks exactly as they were (scouts run), is logged with the
task ids and counted in ``panda_predictor_fallbacks_total``; it never raises into the
caller. The kill switch (``mode: legacy`` or the ``kill_switch_file``) predicts
nothing and audits each task as ``kept_scouts``.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy.engine import Engine

from panda_predictor.core.prediction import TaskPrediction
from panda_predictor.db.engine import make_engine, translate_errors
from panda_predictor.db.reader import find_eligible_tasks, read_task_features
from panda_predictor.db.writer import write_predictions
from panda_predictor.metrics import FALLBACKS, TASKS
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

LEGACY_REASON = "legacy mode (kill switch): scouts run"


@dataclass
class HookReport:
    """What one pass did: the predictions made and what was written."""

    predictions: list[TaskPrediction] = field(default_factory=list)
    applied: list[int] = field(default_factory=list)
    kept_scouts: list[int] = field(default_factory=list)
    moved_by_jedi: list[int] = field(default_factory=list)
    failure: str | None = None
    dry_run: bool = False

    @property
    def written(self) -> int:
        """Return how many tasks got an audit row in this pass."""
        return len(self.applied) + len(self.kept_scouts) + len(self.moved_by_jedi)


def kill_switch_on(settings: Settings) -> bool:
    """Return whether hooks must stay in legacy mode (predict nothing)."""
    if settings.mode == "legacy":
        return True
    return bool(settings.kill_switch_file and settings.kill_switch_file.exists())


def _legacy(task_ids: Iterable[int]) -> list[TaskPrediction]:
    now = datetime.now(UTC).replace(tzinfo=None)
    return [
        TaskPrediction(int(t), "legacy", "-", "kept_scouts", LEGACY_REASON, {}, now)
        for t in task_ids
    ]


class SubmitHook:
    """Predict and write back tasks waiting for scouts; see the module docstring.

    Parameters
    ----------
    settings:
        Database, schema, batch size, kill switch, fixed units.
    predictor_factory:
        Returns the predictor to use (default: the registry's champion); called
        once per pass so a newly promoted champion is picked up.
    history_factory:
        Returns the recent-history index for a pass (default: read from the
        database); None disables history features.
    """

    def __init__(
        self,
        settings: Settings,
        engine: Engine | None = None,
        predictor_factory=None,
        history_factory=None,
    ) -> None:
        self.settings = settings
        self.engine = engine or make_engine(settings)
        self._predictor_factory = predictor_factory or self._champion
        self._history_factory = history_factory or self._recent_history
        self._stop = threading.Event()

    def _champion(self) -> Predictor:
        from panda_predictor.serving.loader import load_champion

        return load_champion(self.settings)

    def _recent_history(self):
        from panda_predictor.serving.recent import read_recent_history

        return read_recent_history(self.engine, self.settings)

    def run_once(
        self, task_ids: Sequence[int] | None = None, dry_run: bool = False
    ) -> HookReport:
        """Handle every eligible task once; never raises (see ``report.failure``)."""
        report = HookReport(dry_run=dry_run)
        try:
            with translate_errors(self.engine):
                self._run(report, task_ids, dry_run)
        except Exception as exc:  # noqa: BLE001  the fail-open boundary
            report.failure = f"{type(exc).__name__}: {exc}"
            FALLBACKS.labels("db", type(exc).__name__).inc()
            log.error(
                "hook pass failed open, tasks left untouched (scouts run): %s",
                report.failure,
            )
        return report

    def _run(
        self, report: HookReport, task_ids: Sequence[int] | None, dry_run: bool
    ) -> None:
        legacy = kill_switch_on(self.settings)
        predictor = history = None
        if not legacy:
            predictor = self._predictor_factory()
            history = self._history_factory()
        batch = self.settings.hook_batch_size
        seen: set[int] = set()
        while not self._stop.is_set():
            with self.engine.connect() as conn, conn.begin():
                ids = find_eligible_tasks(
                    conn,
                    self.settings,
                    limit=batch + len(seen) if dry_run else batch,
                    task_ids=task_ids,
                    lock=not dry_run,
                )
                ids = [i for i in ids if i not in seen]
                if not ids:
                    return
                seen.update(ids)
                if legacy:
                    predictions = _legacy(ids)
                else:
                    assert predictor is not None
                    tasks = read_task_features(conn, self.settings, ids)
                    predictions = predictor.predict(tasks, history)
                report.predictions.extend(predictions)
                if dry_run:
                    continue
                result = write_predictions(
                    conn, self.settings, predictions, self.settings.fixed_units
                )
            report.applied += result.applied
            report.kept_scouts += result.kept_scouts
            report.moved_by_jedi += result.moved_by_jedi
            for decision, ids_ in (
                ("applied", result.applied),
                ("kept_scouts", result.kept_scouts),
                ("moved_by_jedi", result.moved_by_jedi),
            ):
                if ids_:
                    TASKS.labels("db", decision).inc(len(ids_))
            for p in predictions:
                log.info(
                    "jediTaskID=%d decision=%s reason=%s",
                    p.jeditaskid,
                    p.decision,
                    p.reason,
                )

    def watch(self, poll_seconds: float | None = None) -> int:
        """Run passes until SIGTERM/SIGINT or :meth:`stop`; return the passes run."""
        interval = poll_seconds or self.settings.hook_poll_seconds
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        passes = 0
        try:
            while not self._stop.is_set():
                report = self.run_once()
                passes += 1
                if report.written:
                    log.info(
                        "pass %d: %d applied, %d kept scouts, %d moved by JEDI",
                        passes,
                        len(report.applied),
                        len(report.kept_scouts),
                        len(report.moved_by_jedi),
                    )
                self._stop.wait(interval)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        log.info("hook stopped cleanly after %d passes", passes)
        return passes

    def stop(self) -> None:
        """Ask :meth:`watch` to finish after the current transaction."""
        self._stop.set()


def run_hook_once(
    settings: Settings, task_ids: Sequence[int] | None = None, dry_run: bool = False
) -> HookReport:
    """Run one hook pass with the champion model; never raises."""
    try:
        hook = SubmitHook(settings)
    except Exception as exc:  # noqa: BLE001  the fail-open boundary
        FALLBACKS.labels("db", type(exc).__name__).inc()
        log.error("hook could not start, tasks left untouched: %s", exc)
        return HookReport(failure=f"{type(exc).__name__}: {exc}", dry_run=dry_run)
    try:
        return hook.run_once(task_ids, dry_run)
    finally:
        hook.engine.dispose()


__all__ = ["HookReport", "SubmitHook", "kill_switch_on", "run_hook_once"]
