"""The database submit hook: predict tasks waiting for scouts and write back.

One pass pages through the tasks that are ``defined`` or ``ready``, still scheduled
for scouts (``US=`` in SPLITRULE), not held by JEDI (``LOCKEDBY`` NULL) and not yet
audited, in JEDITASKID order, ``hook_batch_size`` at a time. For each batch it reads
and predicts *without any lock*, then writes in one short transaction: the values
(and the scout rule removed) where the decision is ``applied``, with a conditional
update that re-checks status, SPLITRULE and LOCKEDBY, plus an audit row for every
task. So JEDI_TASKS rows are locked only for the write, never while the model runs.

Per-task isolation: when a batch fails to predict or to write because of one task's
data, the batch is split in halves until the failing task is found; that task is
audited with decision ``error`` and its reason, its JEDI row is left untouched
(scouts run) and the rest of the batch proceeds. A task audited ``error`` is never
picked again (operators re-queue it by deleting its audit row, see
docs/operations.md). When *every* task of a batch of two or more fails, the cause is
not a task (a broken model, a changed schema): nothing is audited and the pass fails
open. A database fault that is about no row's data (connection or server gone, a
missing grant, a lock timeout:
:func:`~panda_predictor.hook.isolation.belongs_to_no_task`) is never blamed on a
task either, even in a batch of one: the pass stops at once, nothing is audited.

The hook fails open: a missing model, an unreachable registry or database, or any
other failure leaves the tasks exactly as they were (scouts run), is logged with the
task ids and counted in ``panda_predictor_fallbacks_total``; it never raises into the
caller. The kill switch (``mode: legacy`` or the ``kill_switch_file``) predicts
nothing and audits each task as ``kept_scouts``; it wins over shadow mode. It is
checked again before every write transaction of a pass: once it comes on, nothing
more is written or audited, the tasks left are counted ``stopped_by_kill_switch``
and the pass ends (the next pass, in legacy mode, audits them). In
``mode: shadow`` every task is predicted and audited ``shadow`` and nothing is
written to JEDI_TASKS; with ``rollout_share`` below 1 the tasks outside the share
are audited ``held_back`` and keep their scouts
(:mod:`panda_predictor.core.decide.rollout`).

With ``output: publish`` (or ``both``) a batch's decided tasks are sent as
``scout_prediction`` messages for JEDI's AIParameterAdjuster instead of (or besides)
being written (:mod:`panda_predictor.messages.hook_output`).

The model and the history are loaded only when a pass finds an eligible task, and
the history is kept between passes and refreshed incrementally
(:class:`~panda_predictor.serving.recent.IncrementalHistory`), so an idle pass costs
one indexed query.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from sqlalchemy.engine import Engine

from panda_predictor.core.decide.rollout import route_all
from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.db.audit_writer import ERROR, TaskFailure, write_error_audits
from panda_predictor.db.claims import TaskClaims
from panda_predictor.db.early_remeasure import run_early_remeasure
from panda_predictor.db.engine import make_engine, translate_errors
from panda_predictor.db.reader import find_eligible_tasks, read_task_features
from panda_predictor.db.writer import MOVED_BY_JEDI, WriteResult, write_predictions
from panda_predictor.hook.isolation import isolate
from panda_predictor.hook.report import COUNTED, HANDLED, HookReport, pass_summary
from panda_predictor.log_format import log_task
from panda_predictor.metrics import (
    EARLY_REMEASURES,
    FALLBACKS,
    KILL_SWITCH_TASKS,
    TASKS,
    declare_hook_series,
    record_kill_switch,
    record_pass,
)
from panda_predictor.serving.decision import decide
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import Settings

# One logger for every line of the hook, as before it was a package: operators
# filter on it, and docs/operations.md shows its lines.
log = logging.getLogger("panda_predictor.hook")

LEGACY_REASON = "legacy mode (kill switch): scouts run"
#: Label of this hook in the panda_predictor_* metrics.
HOOK = "db"


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


def _reason(stage: str, exc: BaseException) -> str:
    return f"{stage} failed: {type(exc).__name__}: {exc}"


class _PassServing:
    """The model and history of one pass, loaded at the first batch that needs them.

    An idle pass (no eligible task) so never loads a model or reads history.
    """

    def __init__(self, legacy: bool, predictor_factory, history_factory) -> None:
        self._legacy = legacy
        self._predictor_factory = predictor_factory
        self._history_factory = history_factory
        self._loaded = False
        self._predictor: Any = None
        self._history: Any = None

    def predict(
        self, ids: list[int], tasks: pd.DataFrame | None
    ) -> tuple[list[TaskPrediction], list[TaskFailure]]:
        """Predict a batch, isolating a task whose prediction fails."""
        if self._legacy or tasks is None:
            return _legacy(ids), []
        if not self._loaded:
            self._predictor = self._predictor_factory()
            self._history = self._history_factory()
            self._loaded = True
        predictor, history = self._predictor, self._history
        task_ids = [int(task_id) for task_id in tasks["jeditaskid"]]

        def attempt(part: list[int]) -> list[TaskPrediction]:
            # Invalid rows and requests PanDA would exhaust keep their scouts.
            if len(part) == len(tasks):
                return decide(predictor, tasks, history)
            return decide(predictor, tasks.iloc[part].reset_index(drop=True), history)

        results, failed = isolate(
            list(range(len(tasks))), attempt, lambda row: task_ids[row]
        )
        name = getattr(predictor, "model_name", "-")
        version = str(getattr(predictor, "model_version", "-"))
        failures = [
            TaskFailure(task_id, _reason("prediction", exc), name, version)
            for task_id, exc in failed
        ]
        return [p for part in results for p in part], failures


def _log_tasks(
    predictions: list[TaskPrediction],
    result: WriteResult,
    failures: list[TaskFailure],
    errors: list[int],
) -> None:
    """Log one line per task of a committed batch: the only per-task log line.

    A task already audited (by another hook) gets no line: its line was logged
    when it was audited.
    """
    moved = set(result.moved_by_jedi)
    locked = set(result.locked_by_jedi)
    malformed = set(result.malformed_splitrule)
    done = set(result.applied + result.kept_scouts + result.shadow + result.held_back)
    done |= moved | locked | malformed
    for p in predictions:
        task_id = p.jeditaskid
        if task_id not in done:
            continue
        done.discard(task_id)  # a task twice in one batch is written once
        decision: str = p.decision
        reason = p.reason
        if task_id in moved:
            decision, reason = MOVED_BY_JEDI, result.reasons.get(task_id, reason)
        elif task_id in locked:
            decision = "locked_by_jedi"
            reason = result.reasons.get(task_id, reason) + " (retried next pass)"
        elif task_id in malformed:
            decision, reason = "kept_scouts", result.reasons.get(task_id, reason)
        else:  # applied with a preset kept (never_below_preset) says so
            reason = result.reasons.get(task_id, reason)
        log_task(
            log,
            logging.INFO,
            task_id,
            (p.model_name, p.model_version),
            decision,
            reason,
        )
    audited = set(errors)
    for failure in failures:
        if failure.jeditaskid in audited:
            audited.discard(failure.jeditaskid)
            log_task(
                log,
                logging.WARNING,
                failure.jeditaskid,
                (failure.model_name, failure.model_version),
                ERROR,
                failure.reason + " (left untouched, scouts run)",
            )


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
        self._history: Any = None
        self._stop = threading.Event()
        #: The broker connection of the ``publish`` output, opened at first use.
        self.publisher: Any = None
        declare_hook_series(HOOK)

    def _champion(self) -> Predictor:
        from panda_predictor.serving.loader import load_champion

        return load_champion(self.settings)

    def _recent_history(self):
        """Return the labelled history frame, refreshed with what changed since the
        previous pass (kept in this hook between passes)."""
        from panda_predictor.serving.recent import IncrementalHistory

        if self._history is None:
            self._history = IncrementalHistory(self.engine, self.settings)
        return self._history.frame()

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
            FALLBACKS.labels(HOOK, type(exc).__name__).inc()
            log.error(
                "hook pass failed open, tasks left untouched (scouts run): %s",
                report.failure,
            )
        if not dry_run and report.failure is None:
            self._remeasure_early(report)
        if not dry_run:
            record_pass(HOOK, failed=report.failure is not None)
        return report

    def _remeasure_early(self, report: HookReport) -> None:
        """Ask PanDA to re-measure the running tasks marked for it (written their
        scouts' first values by a champion trained for the early re-measurement)
        that have their first finished jobs
        (:mod:`panda_predictor.db.early_remeasure`); one query when none is.

        Not in legacy mode (the plugin touches nothing) nor in shadow mode (it
        writes nothing to JEDI). A failure here leaves the tasks as they are
        (PanDA re-measures them after 5 jobs anyway): it is logged and counted,
        never raised, and does not fail the pass.
        """
        settings = self.settings
        if settings.mode != "predict" or kill_switch_on(settings):
            return
        try:
            with translate_errors(self.engine):
                result = run_early_remeasure(self.engine, settings)
        except Exception as exc:  # noqa: BLE001  the fail-open boundary
            FALLBACKS.labels(HOOK, "early_remeasure").inc()
            log.error(
                "early re-measurement failed, running tasks left as they are "
                "(PanDA re-measures them after 5 jobs): %s: %s",
                type(exc).__name__,
                exc,
            )
            return
        report.remeasured_early.extend(result.asked)
        EARLY_REMEASURES.labels(HOOK).inc(len(result.asked))

    def _run(
        self, report: HookReport, task_ids: Sequence[int] | None, dry_run: bool
    ) -> None:
        legacy = kill_switch_on(self.settings)
        if not dry_run:
            record_kill_switch(HOOK, legacy)
        serving = _PassServing(legacy, self._predictor_factory, self._history_factory)
        batch = self.settings.hook_batch_size
        after: int | None = None
        # Keyset paging: a task left behind (JEDI holds it, a failed write, another
        # hook's claim) is met again only in the next pass, and never stalls the
        # tasks after it.
        with TaskClaims(self.engine) as claims:
            while not self._stop.is_set():
                with self.engine.connect() as conn:
                    found = find_eligible_tasks(
                        conn, self.settings, batch, task_ids=task_ids, after_id=after
                    )
                    if not found:
                        return
                    after = found[-1]
                    ids = found if dry_run else claims.claim(found)
                    if not ids:
                        continue
                    tasks = (
                        None if legacy else read_task_features(conn, self.settings, ids)
                    )
                predictions, failures = serving.predict(ids, tasks)
                # shadow mode and the rollout share (core.decide.rollout)
                if not legacy:
                    predictions = route_all(
                        predictions, self.settings.mode, self.settings.rollout_share
                    )
                report.predictions += predictions
                if dry_run:
                    continue
                if self._switched_on(legacy):  # before the batch's first write
                    self._stop_pass(report, predictions, failures, WriteResult())
                    return
                result, write_failures = self._output(predictions, legacy)
                failures += write_failures
                if result.stopped_by_kill_switch or (
                    failures and self._switched_on(legacy)
                ):
                    self._stop_pass(report, predictions, failures, result)
                    return
                errors = write_error_audits(self.engine, self.settings, failures)
                self._record(report, predictions, result, errors)
                if legacy:
                    KILL_SWITCH_TASKS.labels(HOOK).inc(len(result.kept_scouts))
                _log_tasks(predictions, result, failures, errors)
                claims.release()

    def _switched_on(self, legacy: bool) -> bool:
        """Return whether the kill switch came on since the pass began.

        Read before every write transaction, so a switch thrown during a long
        pass stops it within one transaction, not at the next pass.
        """
        return not legacy and kill_switch_on(self.settings)

    def _stop_pass(
        self,
        report: HookReport,
        predictions: list[TaskPrediction],
        failures: list[TaskFailure],
        result: WriteResult,
    ) -> None:
        """End the pass because the kill switch came on, writing nothing more.

        The transactions already committed (``result``) are reported as usual;
        every other task of the batch is left untouched and unaudited (its scouts
        run; the next pass, in legacy mode, audits it ``kept_scouts``).
        """
        self._record(report, predictions, result, [])
        _log_tasks(predictions, result, [], [])
        handled = {t for name in HANDLED for t in getattr(result, name)}
        batch = {p.jeditaskid for p in predictions} | {f.jeditaskid for f in failures}
        stopped = sorted(batch - handled)
        report.stopped_by_kill_switch.extend(stopped)
        TASKS.labels(HOOK, "stopped_by_kill_switch").inc(len(stopped))
        log.warning(
            "kill switch came on during the pass: stopped, %d tasks of the batch "
            "left untouched (scouts run): jediTaskID=%s",
            len(stopped),
            ",".join(map(str, stopped)),
        )

    def _output(
        self, predictions: list[TaskPrediction], legacy: bool = False
    ) -> tuple[WriteResult, list[TaskFailure]]:
        """Write the batch (``output: database``) or publish it (``publish``,
        ``both``: :mod:`panda_predictor.messages.hook_output`)."""

        def write(part: list[TaskPrediction]) -> tuple[WriteResult, list[TaskFailure]]:
            return self._write(part, legacy)

        if self.settings.output == "database":
            return write(predictions)
        from panda_predictor.messages.hook_output import publish_batch
        from panda_predictor.messages.publisher import StompPublisher

        if self.publisher is None:
            self.publisher = StompPublisher(self.settings)
        return publish_batch(
            self.settings, self.engine, self.publisher, predictions, write
        )

    def _write(
        self, predictions: list[TaskPrediction], legacy: bool = False
    ) -> tuple[WriteResult, list[TaskFailure]]:
        """Write a batch in one short transaction, isolating a task that fails.

        Halving opens one transaction per part; the kill switch is read before
        each, and a part it stops is returned unwritten (``stopped_by_kill_switch``).
        """

        def attempt(part: list[TaskPrediction]) -> WriteResult:
            if self._switched_on(legacy):
                return WriteResult(stopped_by_kill_switch=[p.jeditaskid for p in part])
            return write_predictions(
                self.engine, self.settings, part, self.settings.fixed_units
            )

        results, failed = isolate(predictions, attempt, lambda p: p.jeditaskid)
        merged = WriteResult()
        for result in results:
            merged.merge(result)
        by_id = {p.jeditaskid: p for p in predictions}
        failures = [
            TaskFailure(
                task_id,
                _reason("write", exc),
                by_id[task_id].model_name,
                by_id[task_id].model_version,
            )
            for task_id, exc in failed
        ]
        return merged, failures

    @staticmethod
    def _record(
        report: HookReport,
        predictions: list[TaskPrediction],
        result: WriteResult,
        errors: list[int],
    ) -> None:
        """Add one committed batch to the report, the metrics."""
        for decision in COUNTED:
            ids = getattr(result, decision)
            getattr(report, decision).extend(ids)
            if ids:
                TASKS.labels(HOOK, decision).inc(len(ids))
        report.errors.extend(errors)
        if errors:
            TASKS.labels(HOOK, "error").inc(len(errors))
            FALLBACKS.labels(HOOK, "task_error").inc(len(errors))

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
                if (
                    report.written
                    or report.locked_by_jedi
                    or report.stopped_by_kill_switch
                    or report.remeasured_early
                ):
                    log.info("pass %d: %s", passes, pass_summary(report))
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
        FALLBACKS.labels(HOOK, type(exc).__name__).inc()
        log.error("hook could not start, tasks left untouched: %s", exc)
        if not dry_run:
            record_pass(HOOK, failed=True)
        return HookReport(failure=f"{type(exc).__name__}: {exc}", dry_run=dry_run)
    try:
        return hook.run_once(task_ids, dry_run)
    finally:
        if hook.publisher is not None:
            hook.publisher.close()
        hook.engine.dispose()


__all__ = ["LEGACY_REASON", "SubmitHook", "kill_switch_on", "run_hook_once"]
