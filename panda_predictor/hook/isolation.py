"""Find the task at fault in a failed batch; tell a task's fault from the database's.

A batch that fails to predict or to write is halved until the failing task is found
(:func:`isolate`), so one task's data never keeps the rest of the batch from its
prediction. A fault that would fail any task alike (the database gone, a missing
grant: :func:`belongs_to_no_task`) is never blamed on a task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import (
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)


def lost_database(exc: BaseException) -> bool:
    """Return whether ``exc`` means the database went away (not one task's fault).

    A lost connection, a stopped server or a busy SQLite file fail every task alike;
    blaming the task that happened to be written would audit healthy tasks as
    ``error`` forever.
    """
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OperationalError | InterfaceError):
            return True
        if getattr(cause, "connection_invalidated", False):
            return True
        cause = cause.__cause__
    return False


#: Database errors that are about the database, its schema or the account's
#: rights, never about one row's values (those are DataError and IntegrityError).
_NO_TASKS_FAULTS = (
    OperationalError,
    InterfaceError,
    ProgrammingError,
    InternalError,
    NotSupportedError,
)


def belongs_to_no_task(exc: BaseException) -> bool:
    """Return whether ``exc`` would fail any task alike, so no task is to blame.

    Besides a lost database (:func:`lost_database`): a missing grant (PostgreSQL
    ``permission denied``, SQLSTATE 42501; Oracle ORA-01031), a missing table or
    column, a lock timeout. Halving a batch cannot find a culprit for these, and
    auditing a healthy task ``error`` would keep it from being predicted forever.
    """
    if lost_database(exc):
        return True
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, _NO_TASKS_FAULTS):
            return True
        cause = cause.__cause__
    return False


class SystemicFailure(RuntimeError):
    """Every task of a batch failed alike: the cause is not a task (fail open)."""


def isolate(
    items: list[Any],
    attempt: Callable[[list[Any]], Any],
    task_id_of: Callable[[Any], int],
) -> tuple[list[Any], list[tuple[int, BaseException]]]:
    """Run ``attempt`` on ``items``, halving on failure until the failing items remain.

    Returns the results of the successful parts and ``(task id, error)`` of each item
    that failed alone. A fault that belongs to no task (:func:`belongs_to_no_task`)
    propagates at once. If every item of two or
    more fails, :class:`SystemicFailure` is raised instead: halving cannot blame a
    task then. Costs at most ``2 log2(n)`` extra attempts per failing item.
    """
    results: list[Any] = []
    failures: list[tuple[int, BaseException]] = []

    def run(part: list[Any]) -> None:
        try:
            results.append(attempt(part))
        except Exception as exc:
            if belongs_to_no_task(exc):
                raise
            if len(part) == 1:
                failures.append((task_id_of(part[0]), exc))
                return
            middle = len(part) // 2
            run(part[:middle])
            run(part[middle:])

    run(items)
    if len(items) > 1 and len(failures) == len(items):
        first = failures[0][1]
        raise SystemicFailure(
            f"all {len(items)} tasks of the batch failed alike, none is blamed: "
            f"{type(first).__name__}: {first}"
        ) from first
    return results, failures
