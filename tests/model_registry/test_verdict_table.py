"""The gate's verdict table: aligned columns, the verdict word, the floor's check."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from model_registry.verdict_table import TABLE_COLUMNS, verdict_table


@dataclass(frozen=True)
class Row:
    """A verdict as the table reads it (the gate's MetricVerdict has these fields)."""

    metric: str = "mean_accuracy"
    better: str = "higher"
    challenger: float | None = 0.71
    champion: float | None = 0.70
    tolerance: float = 0.01
    champion_noise: float = 0.002
    passed_champion: bool | None = True
    floor: float | None = None
    floor_name: str | None = None
    passed_floor: bool | None = None
    passed: bool = True


def test_no_verdicts_give_no_lines():
    assert verdict_table([]) == []


def test_header_then_one_aligned_line_per_verdict():
    lines = verdict_table([Row(), Row(metric="ramcount.tail_recall", challenger=0.9)])
    assert lines[0].split() == list(TABLE_COLUMNS)
    assert len(lines) == 3
    # Right-aligned figures: every line ends its "diff" column at the same place.
    ends = [
        line.index(cell) + len(cell)
        for line, cell in zip(lines, ["diff", "+0.0100", "+0.2000"], strict=True)
    ]
    assert len(set(ends)) == 1


def test_a_missing_champion_has_no_difference():
    row = verdict_table([Row(champion=None, passed_champion=None)])[1]
    assert row.split()[2:5] == ["none", "0.7100", "none"]


@pytest.mark.parametrize(
    "verdict, word",
    [
        (Row(), "ok"),
        (Row(passed=False, passed_champion=False), "WORSE"),
        (Row(passed=False, passed_champion=False, passed_floor=False), "WORSE+FLOOR"),
        (Row(passed=False, passed_floor=False), "BELOW FLOOR"),
        (Row(better="lower", passed=False, passed_floor=False), "OVER GOAL"),
    ],
    ids=["passed", "worse", "worse-and-floor", "below-floor", "over-goal"],
)
def test_the_verdict_word_says_which_check_failed(verdict, word):
    assert verdict_table([verdict])[1].endswith(word)


def test_the_floor_reads_as_the_check_it_must_pass():
    higher = Row(floor=0.7, floor_name="best_recency")
    lower = Row(metric="delay_share", better="lower", floor=1.42, floor_name="scouts")
    unnamed = Row(floor=0.5)
    lines = verdict_table([higher, lower, unnamed])
    assert "> best_recency 0.7000" in lines[1]
    assert "<= scouts 1.4200" in lines[2]
    assert lines[3].split()[-2] == "0.5000"
