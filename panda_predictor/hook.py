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

from sqlalchemy.engine import Connection, Engine

from panda_predictor.core.task_prediction import TaskPrediction
from panda_predictor.db.engine import make_engine, translate_errors
from panda_predictor.db.reader import find_eligible_tasks, read_task_features
from panda_predictor.db.writer import WriteResult, write_predictions
from panda_predictor.metrics import FALLBACKS, TASKS
from panda_predictor.serving.predictor import Predictor
from panda_predictor.serving.task_rules import predict_checked
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

LEGACY_REASON = "legacy mode (kill switch): scouts run"
#: A dry run lists at most this many eligible tasks.
DRY_RUN_LIMIT = 1_000_000


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
        """Return the labelled history frame: features and expert track records."""
        from panda_predictor.serving.recent import read_history_frame

        return read_history_frame(self.engine, self.settings)

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

        def predict(conn: Connection, ids: list[int]) -> list[TaskPrediction]:
            if legacy:
                return _legacy(ids)
            assert predictor is not None
            # Invalid rows and requests PanDA would exhaust keep their scouts.
            return predict_checked(
                predictor, read_task_features(conn, self.settings, ids), history
            )

        batch = self.settings.hook_batch_size
        if dry_run:
            # Nothing is written, so the eligible set does not shrink: list it once.
            with self.engine.connect() as conn:
                ids = find_eligible_tasks(
                    conn, self.settings, DRY_RUN_LIMIT, task_ids=task_ids
                )
                for start in range(0, len(ids), batch):
                    report.predictions += predict(conn, ids[start : start + batch])
            return
        # Every handled task gets an audit row and so leaves the eligible set.
        while not self._stop.is_set():
            with self.engine.connect() as conn, conn.begin():
                ids = find_eligible_tasks(
                    conn, self.settings, batch, task_ids=task_ids, lock=True
                )
                if not ids:
                    return
                predictions = predict(conn, ids)
                result = write_predictions(
                    conn, self.settings, predictions, self.settings.fixed_units
                )
            report.predictions += predictions
            self._record(report, predictions, result)

    @staticmethod
    def _record(
        report: HookReport, predictions: list[TaskPrediction], result: WriteResult
    ) -> None:
        """Add one committed batch to the report, the metrics and the log."""
        for decision in ("applied", "kept_scouts", "moved_by_jedi"):
            ids = getattr(result, decision)
            getattr(report, decision).extend(ids)
            if ids:
                TASKS.labels("db", decision).inc(len(ids))
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
