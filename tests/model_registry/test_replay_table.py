"""The gate's replay against the scouts, laid out per target."""

from __future__ import annotations

from model_registry.gate import (
    SERVED_COST,
    SERVED_DELAY,
    GateEvidence,
    GateThresholds,
    judge,
)
from model_registry.replay_table import (
    GOAL_HEADER,
    GOAL_NOTE,
    HEADING,
    Replay,
    evidence_replay,
    replay_block,
    replay_from_metrics,
    replay_metrics,
    replay_of,
    with_verdicts,
)

SERVED = {
    "mean_accuracy": 0.71,
    SERVED_COST: 2280.6,
    SERVED_DELAY: 0.05,
    "served.ramcount.failed_jobs": 0.0667,
    "served.ramcount.wasted_hours": 0.8002,
    "served.walltime.failed_jobs": 0.0003,
    "served.walltime.wasted_hours": 6.0864,
    # Replayed on this side only: not a row.
    "served.cputime.failed_jobs": 0.0051,
}
SCOUTS = {
    SERVED_COST: 2281.6,
    "served.ramcount.failed_jobs": 0.5076,
    "served.ramcount.wasted_hours": 1.1774,
    "served.walltime.failed_jobs": 0.0004,
    "served.walltime.wasted_hours": 6.1,
}


def test_a_row_per_target_replayed_on_both_sides_with_its_unit():
    replay = replay_of(SERVED, SCOUTS)
    assert [r.target for r in replay.rows] == ["ramcount", "walltime"]
    ram, wall = replay.rows
    assert (ram.failed, ram.scouts_failed) == (0.0667, 0.5076)
    assert (ram.wasted, ram.scouts_wasted) == (0.8002, 1.1774)
    assert (ram.unit, wall.unit) == ("GB-h", "core-h")
    assert ram.cells() == ("ramcount", "0.067", "0.508", "0.8 GB-h", "1.18 GB-h")
    assert replay.kept_scouts == 0.05


def test_the_printed_block_is_aligned_and_says_who_keeps_scouts():
    lines = replay_block(replay_of(SERVED, SCOUTS))
    assert lines[0] == HEADING
    assert lines[1].split()[:3] == ["target", "failed", "jobs"]
    ram = ["ramcount", "0.067", "0.508", "0.8", "GB-h", "1.18", "GB-h"]
    assert lines[2].split() == ram
    assert lines[3].split()[0] == "walltime" and "6.09 core-h" in lines[3]
    assert len({len(line) for line in lines[1:4]}) == 1  # columns line up
    assert lines[4] == (
        "  Tasks that keep their scouts: 5.0 % (with scouts: 100 %; the goal: at "
        "most 20 %)."
    )


def test_the_gates_verdicts_say_which_rows_meet_their_goals_within_the_noise():
    # Walltime fails more jobs than the scouts (0.0003 > 0.0002), within the noise
    # of 0.0002; ramcount wastes more GB-hours than the scouts beyond its noise.
    served = {**SERVED, "served.walltime.failed_jobs": 0.0003}
    scouts = {
        **SCOUTS,
        "served.walltime.failed_jobs": 0.0002,
        "served.ramcount.wasted_hours": 0.7,
    }
    noise = {
        "scouts": {
            "served.walltime.failed_jobs": 0.0002,
            "served.ramcount.wasted_hours": 0.05,
        }
    }
    evidence = GateEvidence(challenger=served, floors={"scouts": scouts}, noise=noise)
    verdicts = judge(evidence, GateThresholds())
    replay = with_verdicts(evidence_replay(evidence), verdicts)
    assert [(r.target, r.goals_met) for r in replay.rows] == [
        ("ramcount", False),
        ("walltime", True),
    ]
    lines = replay_block(replay)
    assert lines[1].split()[-1] == GOAL_HEADER
    assert lines[2].split()[-1] == "missed" and lines[3].split()[-1] == "met"
    assert lines[4] == f"  {GOAL_NOTE}"
    # Without the gate's verdicts (model show) the table has no such column.
    assert GOAL_HEADER not in replay_block(evidence_replay(evidence))[1].split()
    # A row the gate did not judge leaves the column out rather than guess.
    partial = with_verdicts(evidence_replay(evidence), verdicts[:1])
    assert all(r.goals_met is None for r in partial.rows)


def test_nothing_replayed_gives_no_rows_and_no_lines():
    unscored = replay_of({"mean_accuracy": 0.7, SERVED_DELAY: 0.0}, {})
    assert unscored == Replay() and replay_block(unscored) == []
    assert replay_of(SERVED, {}).rows == ()
    assert Replay().kept_scouts_text() == ""


def test_the_replay_of_the_gate_evidence():
    evidence = GateEvidence(challenger=SERVED, floors={"scouts": SCOUTS})
    assert evidence_replay(evidence) == replay_of(SERVED, SCOUTS)
    unscored = GateEvidence(challenger={}, unscored="could not be scored")
    assert evidence_replay(unscored) == Replay() == evidence_replay(None)


def test_the_replay_goes_into_run_metrics_and_comes_back():
    replay = replay_of(SERVED, SCOUTS)
    metrics = replay_metrics(replay)
    assert metrics == {
        "served.ramcount.failed_jobs": 0.0667,
        "scouts.ramcount.failed_jobs": 0.5076,
        "served.ramcount.wasted_hours": 0.8002,
        "scouts.ramcount.wasted_hours": 1.1774,
        "served.walltime.failed_jobs": 0.0003,
        "scouts.walltime.failed_jobs": 0.0004,
        "served.walltime.wasted_hours": 6.0864,
        "scouts.walltime.wasted_hours": 6.1,
        SERVED_DELAY: 0.05,
    }
    assert replay_from_metrics({**metrics, "mean_accuracy": 0.7}) == replay
    assert replay_metrics(Replay()) == {}
