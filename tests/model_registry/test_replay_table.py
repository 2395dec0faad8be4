"""The gate's replay against the scouts, laid out per target."""

from __future__ import annotations

from model_registry.gate import SERVED_COST, SERVED_DELAY, GateEvidence
from model_registry.replay_table import (
    HEADING,
    replay_block,
    replay_markdown,
    replay_metrics,
    replay_rows,
    replay_text,
    split_replay_metrics,
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
    rows = replay_rows(SERVED, SCOUTS)
    assert [r.target for r in rows] == ["ramcount", "walltime"]
    ram, wall = rows
    assert (ram.failed, ram.scouts_failed) == (0.0667, 0.5076)
    assert (ram.wasted, ram.scouts_wasted) == (0.8002, 1.1774)
    assert (ram.unit, wall.unit) == ("GB-h", "core-h")


def test_the_text_table_is_aligned_and_says_who_keeps_scouts():
    lines = replay_text(SERVED, SCOUTS)
    assert lines[0].split()[:3] == ["target", "failed", "jobs"]
    assert lines[1].split() == [
        "ramcount",
        "0.067",
        "0.508",
        "0.8",
        "GB-h",
        "1.18",
        "GB-h",
    ]
    assert lines[2].startswith("walltime") and "6.09 core-h" in lines[2]
    assert len({len(line) for line in lines[:3]}) == 1  # columns line up
    assert lines[3] == (
        "Tasks that keep their scouts: 5.0 % (with scouts: 100 %; the goal: at "
        "most 20 %)."
    )


def test_the_markdown_table_has_a_cell_per_column():
    lines = replay_markdown(SERVED, SCOUTS)
    columns = lines[0].count("|") - 1
    assert lines[1].count("---") == columns
    assert all(line.count("|") - 1 == columns for line in lines[2:4])
    assert lines[2] == "| ramcount | 0.067 | 0.508 | 0.8 GB-h | 1.18 GB-h |"
    assert lines[-1].startswith("Tasks that keep their scouts: 5.0 %")


def test_nothing_replayed_gives_no_lines():
    unscored = {"mean_accuracy": 0.7}
    assert replay_text(unscored, {}) == [] and replay_markdown(unscored, {}) == []
    no_scouts = replay_text(SERVED, {})
    assert no_scouts == []


def test_the_printed_block_reads_the_gate_evidence():
    evidence = GateEvidence(challenger=SERVED, floors={"scouts": SCOUTS})
    block = replay_block(evidence)
    assert block[0] == HEADING
    assert block[1:] == [f"  {line}" for line in replay_text(SERVED, SCOUTS)]
    unscored = GateEvidence(challenger={}, unscored="could not be scored")
    assert replay_block(unscored) == [] and replay_block(None) == []


def test_the_replay_goes_into_run_metrics_and_comes_back():
    metrics = replay_metrics(SERVED, SCOUTS)
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
    served, scouts = split_replay_metrics({**metrics, "mean_accuracy": 0.7})
    assert replay_text(served, scouts) == replay_text(SERVED, SCOUTS)
    assert replay_metrics({}, SCOUTS) == {}
