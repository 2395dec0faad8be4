"""Shadow mode and the rollout share as pure decisions (core.decide.rollout)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from datetime import datetime

import pytest

from panda_predictor.core.decide.rollout import (
    HELD_BACK,
    SHADOW,
    in_rollout,
    rollout_bucket,
    route,
    would_apply,
)
from panda_predictor.core.domain.task_prediction import (
    DECISIONS,
    TargetPrediction,
    TaskPrediction,
)

IDS = list(range(4_000_000, 4_010_000))


def _prediction(
    task_id: int, decision: str, reason: str = "confident"
) -> TaskPrediction:
    ram = TargetPrediction(
        "ramcount", 2, "2000-3000", 2000.0, 3000.0, 3000.0, "MBPerCore", 0.9,
        (0.05, 0.05, 0.9),
    )  # fmt: skip
    return TaskPrediction(
        task_id, "panda-predictor", "7", decision, reason, {"ramcount": ram},
        datetime(2026, 11, 30),
    )  # fmt: skip


def test_new_decisions_are_known_to_the_prediction_type():
    assert {SHADOW, HELD_BACK} <= set(DECISIONS)
    assert _prediction(1, SHADOW).decision == SHADOW


def test_bucket_is_the_sha256_of_the_decimal_id_as_a_fraction():
    digest = hashlib.sha256(b"4000123").digest()
    assert rollout_bucket(4000123) == int.from_bytes(digest[:8], "big") / 2**64
    assert all(0.0 <= rollout_bucket(i) < 1.0 for i in IDS[:100])


def test_bucket_is_the_same_in_another_process_with_another_hash_seed():
    code = (
        "from panda_predictor.core.decide.rollout import rollout_bucket;"
        "print([rollout_bucket(i) for i in range(4000000, 4000020)])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert out.stdout.strip() == str([rollout_bucket(i) for i in IDS[:20]])


@pytest.mark.parametrize("share", [0.1, 0.5, 0.9])
def test_share_selects_about_that_share_of_tasks(share):
    chosen = sum(in_rollout(i, share) for i in IDS) / len(IDS)
    # 10,000 ids: the binomial standard deviation is at most 0.005.
    assert abs(chosen - share) < 0.02


def test_widening_the_share_only_adds_tasks():
    narrow = {i for i in IDS if in_rollout(i, 0.2)}
    wide = {i for i in IDS if in_rollout(i, 0.6)}
    assert narrow < wide


def test_shadow_keeps_the_prediction_and_says_what_it_would_have_done():
    applied = route(_prediction(5, "applied"), "shadow", 1.0)
    kept = route(_prediction(5, "kept_scouts", "low confidence: x"), "shadow", 1.0)
    assert (applied.decision, applied.reason) == (SHADOW, "shadow: would apply")
    assert kept.reason == "shadow: would keep scouts: low confidence: x"
    assert applied.targets == _prediction(5, "applied").targets
    assert would_apply(applied.reason) and not would_apply(kept.reason)


def test_shadow_ignores_the_share():
    routed = [route(_prediction(i, "applied"), "shadow", 0.3) for i in IDS[:50]]
    assert {p.decision for p in routed} == {SHADOW}


@pytest.mark.parametrize("decision", ["applied", "kept_scouts"])
def test_share_zero_holds_every_task_back_and_one_holds_none(decision):
    for task_id in IDS[:200]:
        held = route(_prediction(task_id, decision), "predict", 0.0)
        assert held.decision == HELD_BACK
        assert held.reason.startswith("held back (rollout_share=0): would ")
        assert route(_prediction(task_id, decision), "predict", 1.0).decision == (
            decision
        )


def test_half_share_follows_the_bucket():
    for task_id in IDS[:500]:
        routed = route(_prediction(task_id, "applied"), "predict", 0.5)
        expected = "applied" if rollout_bucket(task_id) < 0.5 else HELD_BACK
        assert routed.decision == expected
        if expected == HELD_BACK:
            assert would_apply(routed.reason)


def test_routing_twice_changes_nothing_more():
    once = route(_prediction(9, "applied"), "shadow", 1.0)
    assert route(once, "predict", 0.0) == once


def test_long_reasons_fit_the_audit_column():
    routed = route(_prediction(9, "kept_scouts", "x" * 400), "shadow", 1.0)
    assert len(routed.reason) == 400


@pytest.mark.parametrize(
    ("mode", "share", "match"),
    [
        ("legacy", 1.0, r"'mode' field must be one of \['predict', 'shadow'\]"),
        ("predict", 1.5, r"'rollout_share' field must be in \[0, 1\]. Got 1.5"),
        ("predict", -0.1, r"'rollout_share' field must be in \[0, 1\]. Got -0.1"),
        ("predict", "half", r"must be a number in \[0, 1\]. Got 'half'"),
    ],
    ids=["legacy-mode", "share-above-1", "negative-share", "share-not-a-number"],
)
def test_bad_mode_or_share_is_a_clear_error(mode, share, match):
    with pytest.raises(ValueError, match=match):
        route(_prediction(1, "applied"), mode, share)


def test_bucket_needs_an_integer_id():
    with pytest.raises(ValueError, match="'jeditaskid' field must be an integer"):
        rollout_bucket("4000123")  # type: ignore[arg-type]
