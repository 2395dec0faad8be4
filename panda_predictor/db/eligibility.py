"""Say why a task the operator named is not one the hook would predict.

``hook --task-id N`` used to print "(no tasks)" and exit 0 for a task that does not
exist, has moved on or was handled already, which reads as success. The rules of
:func:`~panda_predictor.db.reader.find_eligible_tasks` are checked here one by one
on the named tasks, so the command can say which one fails (for an audited task:
the decision and when it was taken) and exit non-zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from panda_predictor.core.domain.splitrule import has_scout_rule
from panda_predictor.db.engine import get_panda_tables, get_plugin_tables
from panda_predictor.db.reader import ELIGIBLE_STATUSES
from panda_predictor.settings import Settings

#: ``Ineligible.rule`` values, in the order they are checked.
NOT_FOUND = "not_found"
AUDITED = "already_audited"
STATUS = "status"
NO_SCOUTS = "no_scout_rule"
LOCKED = "locked_by_jedi"


@dataclass(frozen=True)
class Ineligible:
    """A named task the hook would not predict: the rule it fails and a sentence."""

    jeditaskid: int
    rule: str
    reason: str


def _tag(statement: sa.Select, name: str) -> sa.Select:
    return statement.prefix_with(f"/* eligibility.{name} */", dialect="*")


def why_not_eligible(
    conn: Connection, settings: Settings, task_ids: Iterable[int]
) -> list[Ineligible]:
    """Return one :class:`Ineligible` per named task the hook would skip, id order.

    Checks, first failing rule wins: the task exists in JEDI_TASKS, has no audit
    row (else its decision, time and reason are given), its status is ``defined``
    or ``ready``, its SPLITRULE still asks for scouts (``US=2``) and JEDI does not
    hold it (``LOCKEDBY``). An eligible task is not in the answer.
    """
    ids = sorted({int(task_id) for task_id in task_ids})
    if not ids:
        return []
    t = get_panda_tables(settings, conn).jedi_tasks
    audit = get_plugin_tables(settings, conn).audit
    tasks = {
        int(row.jeditaskid): row
        for row in conn.execute(
            _tag(
                sa.select(
                    t.c.jeditaskid, t.c.status, t.c.splitrule, t.c.lockedby
                ).where(t.c.jeditaskid.in_(ids)),
                "why_not_eligible",
            )
        )
    }
    audits = {
        int(row.jeditaskid): row
        for row in conn.execute(
            _tag(
                sa.select(
                    audit.c.jeditaskid,
                    audit.c.decision,
                    audit.c.reason,
                    audit.c.predicted_at,
                ).where(audit.c.jeditaskid.in_(ids)),
                "why_not_eligible",
            )
        )
    }
    out = []
    for task_id in ids:
        found = _first_failing_rule(task_id, tasks.get(task_id), audits.get(task_id))
        if found is not None:
            out.append(found)
    return out


def _first_failing_rule(task_id: int, task, audit) -> Ineligible | None:
    if task is None:
        return Ineligible(task_id, NOT_FOUND, "not found in JEDI_TASKS")
    if audit is not None:
        when = audit.predicted_at.isoformat(sep=" ", timespec="seconds")
        return Ineligible(
            task_id,
            AUDITED,
            f"already audited: decision {audit.decision} at {when} UTC "
            f"({audit.reason or 'no reason recorded'}); delete its audit row to "
            "predict it again",
        )
    if task.status not in ELIGIBLE_STATUSES:
        return Ineligible(
            task_id,
            STATUS,
            f"status is {task.status!r}; only {' or '.join(ELIGIBLE_STATUSES)} "
            "tasks are predicted",
        )
    if not has_scout_rule(task.splitrule):
        return Ineligible(
            task_id,
            NO_SCOUTS,
            f"SPLITRULE {task.splitrule!r} does not ask for scouts (US=2): "
            "nothing to skip",
        )
    if task.lockedby is not None:
        return Ineligible(
            task_id, LOCKED, f"locked by JEDI ({task.lockedby}); retry later"
        )
    return None


__all__ = [
    "AUDITED",
    "Ineligible",
    "LOCKED",
    "NOT_FOUND",
    "NO_SCOUTS",
    "STATUS",
    "why_not_eligible",
]
