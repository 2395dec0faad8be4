"""The pipeline registry: every name resolves, every pipeline command is listed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from panda_predictor.cli import COMMANDS
from pipelines.registry import PIPELINES, runner


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_entry_resolves_to_a_callable(name):
    assert callable(runner(name))


def test_every_command_that_runs_a_pipeline_is_in_the_registry():
    def runs_a_pipeline(module: str) -> bool:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        return "from pipelines." in Path(spec.origin).read_text()

    commands = {name for name, (module, _, _) in COMMANDS.items()}
    pipeline_commands = {n for n in commands if runs_a_pipeline(COMMANDS[n][0])}
    assert {"train", "labels", "simulate"} <= pipeline_commands
    assert pipeline_commands - set(PIPELINES) == set()


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="must be one of .*'train'.*Got 'trian'"):
        runner("trian")
