"""Configure the process's logging: text for people, JSON lines for log collectors.

Both formats carry the same facts. A per-task line is logged with ``extra=`` fields
(:func:`task_fields`): the text format shows them in its message, starting with
``jediTaskID=N`` so ``grep jediTaskID=123`` finds a task's story; the JSON format
adds each of them as its own key next to ``ts``, ``level``, ``logger`` and ``msg``,
so Loki/Elasticsearch can filter on ``decision`` without parsing text.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from panda_predictor.errors import UserInputError

#: ``--log-format`` values.
LOG_FORMATS = ("text", "json")
#: Level names ``--log-level``/``log_level`` accept.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}


class LogSettingsError(UserInputError):
    """The log level or format is not one we know; the message names the choices."""


def check_level(level: str, field: str = "log_level") -> int:
    """Return the numeric logging level of ``level`` or raise a one-line error."""
    name = str(level).strip().upper()
    if name not in LOG_LEVELS:
        raise LogSettingsError(
            f"The '{field}' setting must be one of {', '.join(LOG_LEVELS)}. "
            f"Got {level!r} instead."
        )
    return int(getattr(logging, name))


def check_format(log_format: str, field: str = "log_format") -> str:
    """Return ``log_format`` if it is ``text`` or ``json``, else raise."""
    if log_format not in LOG_FORMATS:
        raise LogSettingsError(
            f"The '{field}' setting must be one of {', '.join(LOG_FORMATS)}. "
            f"Got {log_format!r} instead."
        )
    return log_format


def task_fields(
    jeditaskid: int, model_version: str, decision: str, reason: str
) -> dict[str, Any]:
    """Return the ``extra=`` fields of a per-task log line (JSON keys)."""
    return {
        "jediTaskID": int(jeditaskid),
        "model_version": str(model_version),
        "decision": decision,
        "reason": reason,
    }


def log_task(
    logger: logging.Logger,
    level: int,
    jeditaskid: int,
    model: tuple[str, str],
    decision: str,
    reason: str,
) -> None:
    """Log the one line of a task: ``jediTaskID=N`` first, then model and decision.

    ``model`` is ``(name, version)``. The fields also go as ``extra=`` keys, so the
    JSON format carries them as keys of their own.
    """
    name, version = model
    logger.log(
        level,
        "jediTaskID=%d model=%s version=%s decision=%s reason=%s",
        jeditaskid,
        name,
        version,
        decision,
        reason,
        extra={"model": name, **task_fields(jeditaskid, version, decision, reason)},
    )


class JsonFormatter(logging.Formatter):
    """Format a record as one JSON object per line: ts, level, logger, msg, extras."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def configure_logging(
    level: str | int, log_format: str = "text", stream: TextIO | None = None
) -> None:
    """Send every log record to ``stream`` (stderr) at ``level`` in ``log_format``.

    Replaces the root logger's handlers, so calling it twice (tests, a CLI run in
    a process) does not double the lines.
    """
    numeric = level if isinstance(level, int) else check_level(level)
    handler = logging.StreamHandler(stream or sys.stderr)
    if check_format(log_format) == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)


__all__ = [
    "JsonFormatter",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "LogSettingsError",
    "check_format",
    "check_level",
    "configure_logging",
    "log_task",
    "task_fields",
]
