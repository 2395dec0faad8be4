"""JEDI's AIParameterAdjuster message processor: apply scout_prediction messages.

JEDI's message processor (``pandajedi/jediorder/JediMsgProcessor.py``) loads this
class from its JSON config (see docs/jedi-plugin.md) and calls :meth:`process` with
each message of its queue; the message is acknowledged when ``process`` returns and
sent again by the broker when it raises. So:

- a bad message (not JSON, not the schema, wrong units, unknown task, a task no
  longer ``defined``, expired) costs only itself: it is refused or rejected,
  recorded in ``pp_message_applied`` with its reason, logged with ``jediTaskID=``
  when it has one, and acknowledged, never raised (a raise would redeliver it
  forever);
- an idempotency key already recorded changes nothing (its ``deliveries`` count
  rises), so a redelivered or republished message is applied at most once;
- only a fault that is not the message's (database or task buffer down) raises, so
  the broker keeps the message and delivers it again: the task is left as it was
  (scouts run) until then, and nothing is half-applied;
- a message applied with ``early_remeasure`` marks its task in
  ``pp_early_remeasure`` in the transaction that records it, as the hook's own
  writer does, so the hook asks PanDA to re-measure it once its first 3 jobs
  are settled (:mod:`panda_predictor.db.early_remeasure`).

Inside JEDI the task is written through JEDI's task buffer (``self.tbIF``,
:class:`~.task_writers.TaskBufferWriter`); with ``writer: sql`` in the processor's
parameters a received batch is written in one transaction over SQLAlchemy
(:class:`~.task_writers.SqlTaskWriter`), atomically with its idempotency keys.
"""

from __future__ import annotations

import hashlib
import logging
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine

from panda_predictor.db.early_remeasure import mark_tasks
from panda_predictor.db.engine import make_engine, translate_errors
from panda_predictor.db.messages import applied_keys, count_redelivery, record_handled
from panda_predictor.messages.scout_prediction import (
    MessageError,
    ScoutPrediction,
    parse_message,
)
from panda_predictor.plugins.task_writers import SqlTaskWriter, TaskBufferWriter
from panda_predictor.settings import Settings, load_settings

log = logging.getLogger(__name__)

#: Inside JEDI (its configuration is loaded) the plugin subclasses PanDA's own base
#: class; elsewhere PanDA's modules do not import without JEDI's configuration and
#: dependencies (rucio), so a stand-in base with the same methods is used.
IN_JEDI = "pandajedi.jediconfig" in sys.modules

if IN_JEDI:
    from pandajedi.jedimsgprocessor.base_msg_processor import (  # type: ignore
        BaseMsgProcPlugin as _Base,
    )
else:

    class _Base:  # type: ignore[no-redef]
        """Stand-in for PanDA's BaseMsgProcPlugin outside JEDI."""

        def __init__(self, **params: Any) -> None:
            self.params = params

        def initialize(self) -> None:
            """Nothing to set up without JEDI."""

        def terminate(self) -> None:
            """Nothing to tear down."""


@dataclass(frozen=True)
class Delivery:
    """One received message: its broker id and body."""

    message_id: str
    body: Any


@dataclass(frozen=True)
class Handled:
    """What happened to one delivery."""

    key: str
    task_id: int | None
    outcome: str
    reason: str


def body_key(body: Any) -> str:
    """Return the key of a message that has none of its own (hash of the body)."""
    raw = body if isinstance(body, bytes) else str(body).encode("utf-8", "replace")
    return f"body-{hashlib.sha256(raw).hexdigest()[:40]}"


class MessageApplier:
    """Handle batches of deliveries: validate, deduplicate, apply, record.

    Parameters
    ----------
    engine:
        The database holding ``pp_message_applied`` (and, for the SQL writer,
        JEDI_TASKS).
    settings:
        Names the schemas.
    task_buffer:
        JEDI's task buffer; None writes with :class:`SqlTaskWriter`.
    """

    def __init__(self, engine: Engine, settings: Settings, task_buffer: Any = None):
        self.engine = engine
        self.settings = settings
        self.tb_writer = (
            TaskBufferWriter(task_buffer) if task_buffer is not None else None
        )
        self.sql_writer = SqlTaskWriter(settings)
        self.host = socket.gethostname()[:128]

    def handle(self, deliveries: Sequence[Delivery]) -> list[Handled]:
        """Handle a batch; raises only for faults that are not a message's own."""
        now = datetime.now(UTC)
        results, valid = _parse_all(deliveries)
        keys = [h.key for h in results.values()] + [
            m.idempotency_key for _, m, _ in valid
        ]
        with translate_errors(self.engine), self.engine.begin() as conn:
            known = applied_keys(conn, self.settings, keys)
            fresh, duplicates = _sort_out(valid, results, known, now)
            applied = self._apply(conn, [m for _, m, _ in fresh])
            for i, message, key in fresh:
                outcome, reason = applied[key]
                results[i] = Handled(key, message.task_id, outcome, reason)
            mark_tasks(conn, self.settings, _early_marks(fresh, results))
            rows = self._handled_rows(results, deliveries, now)
            record_handled(conn, self.settings, rows)
            count_redelivery(conn, self.settings, duplicates)
        out = [results[i] for i in range(len(deliveries))]
        for h in out:
            _log(h)
        return out

    def _handled_rows(
        self,
        results: dict[int, Handled],
        deliveries: Sequence[Delivery],
        now: datetime,
    ) -> list[dict[str, Any]]:
        """Return the ``pp_message_applied`` rows of the batch (duplicates have one)."""
        ids = {i: d.message_id for i, d in enumerate(deliveries)}
        return [
            {
                "idempotency_key": h.key,
                "jeditaskid": h.task_id,
                "outcome": h.outcome,
                "reason": h.reason[:400],
                "message_id": str(ids[i])[:128],
                "received_at": now.replace(tzinfo=None),
                "deliveries": 1,
                "host": self.host,
            }
            for i, h in sorted(results.items())
            if h.outcome != "duplicate"
        ]

    def _apply(
        self, conn: Any, messages: list[ScoutPrediction]
    ) -> dict[str, tuple[str, str]]:
        if self.tb_writer is None:
            return self.sql_writer.apply_batch(conn, messages)
        return {m.idempotency_key: self.tb_writer.apply(m) for m in messages}


def _early_marks(
    fresh: list[tuple[int, ScoutPrediction, str]], results: dict[int, Handled]
) -> list[int]:
    """Return the tasks of ``fresh`` applied from a message that asks for the early
    re-measurement (:mod:`panda_predictor.db.early_remeasure`)."""
    return [
        message.task_id
        for i, message, _ in fresh
        if message.early_remeasure and results[i].outcome == "applied"
    ]


def _parse_all(
    deliveries: Sequence[Delivery],
) -> tuple[dict[int, Handled], list[tuple[int, ScoutPrediction, str]]]:
    """Parse each delivery; return the rejected ones' outcomes (by position) and
    the valid messages with their position and broker message id."""
    results: dict[int, Handled] = {}
    valid: list[tuple[int, ScoutPrediction, str]] = []
    for i, delivery in enumerate(deliveries):
        try:
            message = parse_message(delivery.body)
        except MessageError as exc:
            results[i] = Handled(
                body_key(delivery.body), exc.task_id, "rejected", str(exc)
            )
            continue
        valid.append((i, message, delivery.message_id))
    return results, valid


def _sort_out(
    valid: list[tuple[int, ScoutPrediction, str]],
    results: dict[int, Handled],
    known: set[str],
    now: datetime,
) -> tuple[list[tuple[int, ScoutPrediction, str]], list[str]]:
    """Settle every message that needs no write; return those to write and the
    keys handled before (redeliveries).

    A key already handled (``known``, or earlier in the batch) is a duplicate; an
    expired message and a ``kept_scouts`` decision are recorded as such. The
    outcomes go into ``results``; a message rejected twice becomes a duplicate too.
    """
    fresh: list[tuple[int, ScoutPrediction, str]] = []
    seen: set[str] = set()
    duplicates: list[str] = []
    for i, message, _ in valid:
        key = message.idempotency_key
        if key in known or key in seen:
            duplicates.append(key)
            results[i] = Handled(
                key,
                message.task_id,
                "duplicate",
                "already handled: nothing changed",
            )
            continue
        seen.add(key)
        if message.expired(now):
            results[i] = Handled(
                key,
                message.task_id,
                "expired",
                f"expired at {message.expires_at.isoformat()}",
            )
        elif message.decision == "kept_scouts":
            results[i] = Handled(
                key,
                message.task_id,
                "kept_scouts",
                f"decision kept_scouts: {message.reason}",
            )
        else:
            fresh.append((i, message, key))
    for i, h in list(results.items()):  # rejected twice in one batch
        if h.outcome == "rejected" and (h.key in known or h.key in seen):
            duplicates.append(h.key)
            results[i] = Handled(h.key, h.task_id, "duplicate", "already rejected")
        elif h.outcome == "rejected":
            seen.add(h.key)
    return fresh, duplicates


def _log(h: Handled) -> None:
    level = (
        logging.WARNING
        if h.outcome in ("rejected", "refused", "expired")
        else logging.INFO
    )
    if h.task_id is not None:
        log.log(
            level,
            "jediTaskID=%d scout_prediction %s: %s (key %s)",
            h.task_id,
            h.outcome,
            h.reason,
            h.key,
        )
    else:
        log.log(
            level,
            "jediTaskID=unknown scout_prediction %s: %s (key %s)",
            h.outcome,
            h.reason,
            h.key,
        )


#: Keys of the processor's entry the plugin reads (as attributes or in "params").
_ENTRY_KEYS = ("config_file", "writer")


class AIParameterAdjuster(_Base):
    """JEDI message processor for ``scout_prediction`` messages (module docstring).

    Parameters (``params`` of the processor's entry in JEDI's msg-processor JSON
    config, which PanDA's plugin factory passes to the constructor):

    ``config_file``
        panda-predictor's YAML settings (db_url, schemas); default: the
        ``PANDA_PREDICTOR_CONFIG`` environment variable.
    ``writer``
        ``task_buffer`` (default: JEDI's own calls) or ``sql`` (batched writes).
    ``task_buffer``
        A task-buffer object to use instead of JEDI's (tests).
    """

    def initialize(self, *args: Any, **kwargs: Any) -> None:
        """Set up the settings, the database and the writer (once per thread)."""
        # PanDA's plugin factory passes the entry's "params" to __init__ and sets its
        # other keys as attributes: read both.
        params = {
            **{k: getattr(self, k) for k in _ENTRY_KEYS if hasattr(self, k)},
            **(getattr(self, "params", {}) or {}),
        }
        self.settings = load_settings(params.get("config_file"))
        task_buffer = params.get("task_buffer")
        if task_buffer is None and params.get("writer", "task_buffer") == "task_buffer":
            super().initialize(*args, **kwargs)  # JEDI's BaseMsgProcPlugin sets tbIF
            task_buffer = getattr(self, "tbIF", None)
            if task_buffer is None:
                raise RuntimeError(
                    "The 'writer' parameter is 'task_buffer' but JEDI's task buffer "
                    "is not available here. Run inside JEDI or set writer: sql."
                )
        self._own_engine = params.get("engine") is None
        self.engine = params.get("engine") or make_engine(self.settings)
        self.applier = MessageApplier(self.engine, self.settings, task_buffer)

    def terminate(self) -> None:
        """Close the plugin's database connections (JEDI calls it at stop)."""
        if getattr(self, "_own_engine", False):
            self.engine.dispose()
        super().terminate()

    def process(self, msg_obj: Any, decoded_data: Any = None) -> None:
        """Handle one message from JEDI's queue (``msg_obj.data``); see the module."""
        body = decoded_data if decoded_data is not None else msg_obj.data
        message_id = getattr(msg_obj, "msg_id", "") or ""
        self.applier.handle([Delivery(str(message_id), body)])

    def process_batch(self, deliveries: Sequence[Delivery]) -> list[Handled]:
        """Handle several received messages at once (one transaction)."""
        return self.applier.handle(deliveries)
