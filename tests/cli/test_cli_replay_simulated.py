"""``panda-predictor replay-simulated`` checks its task count before simulating."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from panda_predictor.cli.replay_simulated import replay_simulated_command


@pytest.mark.parametrize(
    "args, code, match",
    [
        (["--tasks", "0"], 1, "The 'n_tasks' field must be an integer >= 100. Got 0"),
        (["--delay-price", "-1"], 2, "-1.0 is not in the range x>=0.0"),
    ],
    ids=["too-few-tasks", "negative-delay-price"],
)
def test_bad_options_are_refused_in_one_line(args, code, match):
    result = CliRunner().invoke(replay_simulated_command, args)
    assert result.exit_code == code
    assert match in result.output
