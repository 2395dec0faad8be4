"""``panda-predictor hook``: options that do not go together, and the textfile."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from panda_predictor.cli.hook import NOT_ELIGIBLE_EXIT, hook
from panda_predictor.settings import load_settings


@pytest.mark.parametrize(
    "args, match",
    [
        (["--watch", "--dry-run"], "--watch cannot be combined with --dry-run"),
        (["--watch", "--task-id", "7"], "--watch cannot be combined with"),
        (
            ["--watch", "--metrics-textfile", "x.prom"],
            "with --watch use --metrics-port",
        ),
        (["--metrics-port", "9100"], "with --once use --metrics-textfile"),
    ],
    ids=["watch-dry-run", "watch-task-id", "watch-textfile", "once-port"],
)
def test_options_of_the_other_mode_are_usage_errors(tmp_path, args, match):
    settings = load_settings(home=tmp_path)
    result = CliRunner().invoke(hook, args, obj=settings)
    assert result.exit_code == 2
    assert match in result.output
    assert not (tmp_path / "panda.sqlite").exists()  # refused before any database


def test_not_eligible_has_its_own_exit_code():
    # 1 is a user error, 2 a usage error, 3 a failed-open pass (docs/operations.md).
    assert NOT_ELIGIBLE_EXIT == 4
