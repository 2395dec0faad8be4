"""The replay goals' marks, in the order every table prints them."""

from __future__ import annotations

import pytest

from panda_predictor.core.replay.goals import GOALS, goal_marks


def test_goal_marks_follow_the_goals_order():
    goals = {"failed_jobs": True, "waste": False, "bulk_delay": True}
    goals["not_dominated"] = False
    assert goal_marks(goals) == "✓✗✓✗"
    assert goal_marks(dict.fromkeys(reversed(GOALS), True)) == "✓✓✓✓"


def test_goal_marks_need_every_goal():
    with pytest.raises(KeyError, match="not_dominated"):
        goal_marks({"failed_jobs": True, "waste": True, "bulk_delay": True})
