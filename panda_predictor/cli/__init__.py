"""The ``panda-predictor`` command line.

Each sub-command lives in its own module under ``panda_predictor.cli`` and is imported
only when it runs, so ``panda-predictor --help`` stays fast (no TensorFlow import).
Here: options, user-input errors as one line, printed results. Not here: what a command
does; each calls into the package that does it (hook/, pipelines/, db/, ...).
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from panda_predictor.log_format import LOG_FORMATS, LOG_LEVELS, configure_logging
from panda_predictor.settings import SettingsError, load_settings

#: command name -> (module, attribute, one-line help shown by --help)
COMMANDS: dict[str, tuple[str, str, str]] = {}


def register(name: str, module: str, attribute: str, short_help: str) -> None:
    """Add a lazily imported sub-command to the ``panda-predictor`` group."""
    COMMANDS[name] = (module, attribute, short_help)


class LazyGroup(click.Group):
    """A click group that imports a sub-command's module only when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*COMMANDS, *super().list_commands(ctx)])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS:
            module, attribute, _ = COMMANDS[cmd_name]
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, cmd_name)

    def format_commands(
        self, ctx: click.Context, formatter: click.HelpFormatter
    ) -> None:
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="YAML file of settings (default: $PANDA_PREDICTOR_CONFIG).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log at DEBUG level.")
@click.option(
    "--log-level",
    default=None,
    metavar="|".join(LOG_LEVELS),
    help="Logging level (default: the log_level setting, INFO). TensorFlow's "
    "start-up lines show only at DEBUG.",
)
@click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default=None,
    help="text for people, json for log collectors: one object per line with ts, "
    "level, logger, msg and the task fields (default: the log_format setting).",
)
@click.version_option(package_name="panda-predictor")
@click.pass_context
def main(
    ctx: click.Context,
    config_file: str | None,
    verbose: bool,
    log_level: str | None,
    log_format: str | None,
) -> None:
    """Predict a PanDA task's resources at submission so it can skip scout jobs.

    Settings come from defaults, a YAML config file and PANDA_PREDICTOR_* environment
    variables; see docs/operations.md.

    \b
    Examples:
      panda-predictor demo --tasks 3000 --defined 12
      panda-predictor --config /etc/panda-predictor.yaml hook --once
      panda-predictor hook --help
    """
    # Before any sub-command imports MLflow (it starts telemetry on import).
    from model_registry.tracking import disable_mlflow_telemetry

    disable_mlflow_telemetry()
    overrides: dict[str, Any] = {}
    if verbose:
        overrides["log_level"] = "DEBUG"
    elif log_level is not None:
        overrides["log_level"] = log_level
    if log_format is not None:
        overrides["log_format"] = log_format
    try:
        settings = load_settings(config_file, **overrides)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    # Before any sub-command imports TensorFlow: models.backend reads this level.
    configure_logging(settings.log_level, settings.log_format)
    ctx.obj = settings


from panda_predictor.cli import registry as _registry  # noqa: E402,F401  (fills COMMANDS)
