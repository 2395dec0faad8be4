"""The list of sub-commands: each names a click command that really exists."""

from __future__ import annotations

import importlib

import click

import panda_predictor.cli.registry  # noqa: F401  (fills COMMANDS)
from panda_predictor.cli import COMMANDS, main


def test_every_registered_command_imports_and_has_its_name():
    assert {"db", "hook", "train", "serve", "model", "demo"} <= set(COMMANDS)
    for name, (module, attribute, short_help) in COMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), name
        assert command.name == name, (name, command.name)
        assert short_help.endswith("."), name


def test_the_group_lists_exactly_the_registered_commands():
    ctx = click.Context(main)
    assert main.list_commands(ctx) == sorted(COMMANDS)
