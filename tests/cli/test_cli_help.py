"""Every command and sub-command's --help ends with an example that really parses.

The commands are found by walking the click tree (not a hand-kept list), so a new
command without an example fails here. Each example line is run through click's own
option parser, so an example naming a renamed or removed option fails too.
"""

from __future__ import annotations

import re
import shlex

import click
import pytest
from click.testing import CliRunner

from panda_predictor.cli import COMMANDS, main

PROGRAM = "panda-predictor"
#: A shell word that ends the example's own command line (pipes, redirections, ...).
SHELL_END = re.compile(r"^(\|\|?|&&|;|\d*>>?.*|<.*)$")
EXAMPLE_HEADING = re.compile(r"^\s*Examples?\b[^:]*:\s*$")


def walk(command: click.Command, path: tuple[str, ...], ctx: click.Context):
    """Yield (path, command) for ``command`` and, recursively, all its sub-commands."""
    yield path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{' '.join(path + (name,))} is listed but unknown"
            yield from walk(sub, path + (name,), click.Context(sub, ctx, name))


def all_commands() -> dict[tuple[str, ...], click.Command]:
    return dict(walk(main, (), click.Context(main, info_name=PROGRAM)))


def example_lines(help_text: str) -> list[str]:
    """Return the lines of every "Example:"/"Examples:" section of a --help page.

    A line ending in a backslash is joined with the next, as the shell would.
    """
    lines, found, inside = help_text.replace("\\\n", " ").splitlines(), [], False
    for line in lines:
        if EXAMPLE_HEADING.match(line):
            inside = True
        elif inside and line.strip():
            found.append(" ".join(line.split()))
        elif inside:
            inside = False
    return found


def invoked_path(words: list[str]) -> tuple[str, ...]:
    """Parse ``panda-predictor WORDS`` as click would; return the command path reached.

    Raises click's own error (e.g. NoSuchOption) when an option does not exist, and
    AssertionError when a command is unknown or the positional arguments do not fit.
    """
    command: click.Command = main
    ctx = click.Context(main, info_name=PROGRAM)
    path: tuple[str, ...] = ()
    while True:
        opts, rest, _ = command.make_parser(ctx).parse_args(list(words))
        if not isinstance(command, click.Group):
            break
        if not rest:
            return path
        name, words = rest[0], rest[1:]
        sub = command.get_command(ctx, name)
        assert sub is not None, f"unknown command {name!r} after {path}"
        command, path = sub, path + (name,)
        ctx = click.Context(sub, ctx, name)
    assert not rest, f"{path}: unexpected arguments {rest}"
    for param in command.params:
        if isinstance(param, click.Argument) and param.required:
            value = opts.get(param.name)  # click's "unset" sentinel when missing
            given = isinstance(value, str) or (
                isinstance(value, (list, tuple)) and value
            )
            assert given, f"{path}: argument {param.name} missing"
    return path


def invocations(line: str) -> list[list[str]]:
    """Return the argument lists of the ``panda-predictor ...`` calls on a line."""
    words = shlex.split(line, comments=True)
    calls = []
    for start, word in enumerate(words):
        if word != PROGRAM:
            continue
        args = []
        for arg in words[start + 1 :]:
            if SHELL_END.match(arg):
                break
            args.append(arg)
        calls.append(args)
    return calls


def test_the_walk_finds_every_registered_command_and_sub_command():
    paths = set(all_commands())
    assert {p[0] for p in paths if len(p) == 1} == set(COMMANDS)
    assert {("db", "init"), ("db", "upgrade"), ("db", "check")} <= paths
    assert {("ingest", "log"), ("ingest", "swf")} <= paths
    assert len(paths) >= 1 + len(COMMANDS) + 5


@pytest.mark.parametrize(
    "path", sorted(all_commands()), ids=lambda p: " ".join(p) or PROGRAM
)
def test_every_command_has_help_with_an_example(path):
    result = CliRunner().invoke(main, [*path, "--help"], prog_name=PROGRAM)
    assert result.exit_code == 0, result.output
    assert f"Usage: {' '.join((PROGRAM, *path))}" in result.output
    examples = example_lines(result.output)
    assert examples, f"no 'Example:' section in:\n{result.output}"
    reached = [invoked_path(args) for line in examples for args in invocations(line)]
    assert any(r[: len(path)] == path for r in reached), (
        f"no example runs {' '.join((PROGRAM, *path))}: {examples}"
    )


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("panda-predictor hook --onse", click.NoSuchOption),
        ("panda-predictor hok --once", AssertionError),
        ("panda-predictor ingest log", AssertionError),
        ("panda-predictor db init extra", AssertionError),
    ],
)
def test_a_wrong_example_is_caught(line, error):
    (args,) = invocations(line)
    with pytest.raises(error):
        invoked_path(args)


def test_examples_are_read_from_shell_lines():
    line = "condor_history -json > h.json && panda-predictor ingest log h.json # x"
    assert invocations(line) == [["ingest", "log", "h.json"]]
    cron = "30 2 1 * * panda-predictor retrain --no-progress >> /var/log/r.log 2>&1"
    assert invocations(cron) == [["retrain", "--no-progress"]]
    assert invoked_path(["--config", "site.yaml", "hook", "--once"]) == ("hook",)
    page = "Usage: x\n\n  Examples:\n    a \\\n      b\n    c\n\n  Other:\n    d"
    assert example_lines(page) == ["a b", "c"]
