"""Hooks claim tasks without locking JEDI's rows: advisory locks on PostgreSQL."""

from __future__ import annotations

import random

from panda_predictor.db.claims import TaskClaims
from panda_predictor.db.engine import dialect_of


def _ids(n: int) -> list[int]:
    # Advisory locks are per server: ids no other test on this server uses.
    start = random.SystemRandom().randrange(10**12, 10**15)
    return [start + i for i in range(n)]


def test_a_second_hook_gets_only_what_the_first_does_not_hold(engine):
    first_ids = _ids(3)
    with TaskClaims(engine) as first, TaskClaims(engine) as second:
        assert first.claim(first_ids[:2]) == first_ids[:2]
        taken = second.claim(first_ids)
        if dialect_of(engine) == "postgresql":
            assert taken == first_ids[2:]
            first.release()
            assert second.claim(first_ids[:2]) == first_ids[:2]
        else:  # no advisory locks: the audit's key keeps a task written once
            assert taken == first_ids


def test_claims_end_with_the_context(engine):
    ids = _ids(2)
    with TaskClaims(engine) as first:
        assert first.claim(ids) == ids
    with TaskClaims(engine) as second:
        assert second.claim(ids) == ids
        assert second.claim([]) == []
