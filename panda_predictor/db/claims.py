"""Keep parallel hooks off each other's tasks without locking JEDI_TASKS rows.

The hook predicts outside any transaction so JEDI is never blocked by a running
model; a row lock can therefore no longer tell a second hook that a task is taken.
On PostgreSQL a hook instead holds a session-level advisory lock per task while it
predicts and writes the batch (``pg_try_advisory_lock``): it locks nothing JEDI
reads or writes, and a crashed hook's claims vanish with its connection. Other
databases claim every task; the audit row's primary key and the writer's "already
audited" check still make sure a task is written once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from panda_predictor.db.engine import dialect_of, translate_errors

log = logging.getLogger(__name__)

#: First key of the two-key advisory locks, so ours never meet another program's.
ADVISORY_NAMESPACE = 0x5050  # "PP"
_INT4 = 2**31 - 1


class TaskClaims:
    """Claims of one hook on the tasks of its current batch; see the module docstring.

    Use as a context manager: the claims' connection is opened on entry and every
    claim is released on :meth:`release` and on exit.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._advisory = dialect_of(engine) == "postgresql"
        self._conn: Connection | None = None

    def __enter__(self) -> TaskClaims:
        if self._advisory:
            with translate_errors(self._engine):
                self._conn = self._engine.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is None:
            return
        self.release()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def claim(self, task_ids: Sequence[int]) -> list[int]:
        """Return the ids this hook now holds (another hook holds the rest)."""
        if not self._advisory or not task_ids:
            return list(task_ids)
        query = sa.text(
            "/* claims.claim */ SELECT id FROM unnest(CAST(:ids AS BIGINT[])) AS id "
            "WHERE pg_try_advisory_lock(:ns, CAST(mod(id, :int4) AS INTEGER))"
        )
        params = {
            "ids": [int(i) for i in task_ids],
            "ns": ADVISORY_NAMESPACE,
            "int4": _INT4,
        }
        with translate_errors(self._engine):
            if self._conn is None or self._conn.invalidated or self._conn.closed:
                # The connection died with its claims (server restart, killed
                # backend): open a new one.
                self._conn = self._engine.connect()
            held = set(self._conn.execute(query, params).scalars())
            self._conn.commit()
        skipped = len(task_ids) - len(held)
        if skipped:
            log.info("%d tasks of the batch are claimed by another hook", skipped)
        return [int(i) for i in task_ids if int(i) in held]

    def release(self) -> None:
        """Release every claim of this hook (a dead connection has none left)."""
        if self._conn is None:
            return
        try:
            self._conn.execute(
                sa.text("/* claims.release */ SELECT pg_advisory_unlock_all()")
            )
            self._conn.commit()
        except sa.exc.SQLAlchemyError as exc:
            # Closing the broken connection ends its session, and so its claims;
            # it must never go back to the pool.
            log.warning("claims connection lost, its claims end with it: %s", exc)
            self._conn.invalidate()
            self._conn.close()
            self._conn = None
