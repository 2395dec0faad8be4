"""``panda-predictor model``: see the registered versions and move the champion."""

from __future__ import annotations

import click

from panda_predictor.settings import Settings

REASON_HELP = "Why (recorded on the version with who and when). Required."


@click.group("model")
def model() -> None:
    """List and inspect registered versions; promote or roll back the champion.

    The gate moves the 'champion' alias after each training; these commands let a
    person see why and overrule it. Promote and rollback record who, when and why
    as tags of the version (manual.by, manual.at, manual.reason) and keep the
    replaced champion as the 'previous' alias, where rollback goes.

    \b
    Examples:
      panda-predictor model list
      panda-predictor model show 3
      panda-predictor model promote 4 --reason "ramcount under-allocation 0.28 -> 0.17"
      panda-predictor model rollback --reason "walltime failures doubled since 4"
    """


def _fmt_metrics(metrics: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.3f}" for k, v in metrics.items()) or "-"


@model.command("list")
@click.pass_obj
def list_command(settings: Settings) -> None:
    """List versions, newest first: aliases, created, key metrics, gate verdict.

    \b
    Example:
      panda-predictor model list
    """
    from model_registry.manual import list_versions
    from panda_predictor.cli.errors import user_errors

    with user_errors():
        rows = list_versions(settings)
    if not rows:
        click.echo(f"No versions of {settings.model_name!r} yet.")
        return
    click.echo("version  aliases               created (UTC)     metrics | verdict")
    for row in rows:
        created = f"{row.created:%Y-%m-%d %H:%M}" if row.created else "?"
        aliases = ",".join(row.aliases) or "-"
        click.echo(
            f"{row.version:>7}  {aliases:<20}  {created:<16}  "
            f"{_fmt_metrics(row.metrics)} | {row.verdict}"
        )


@model.command("show")
@click.argument("version", type=click.IntRange(min=1))
@click.option("--all-metrics", is_flag=True, help="Print every run metric.")
@click.pass_obj
def show_command(settings: Settings, version: int, all_metrics: bool) -> None:
    """Show one version: aliases, lineage (run, data, commit), params, metrics, tags.

    \b
    Examples:
      panda-predictor model show 3
      panda-predictor model show 3 --all-metrics
    """
    from model_registry.manual import KEY_METRICS, show_version
    from model_registry.replay_table import replay_block, replay_from_metrics
    from panda_predictor.cli.errors import user_errors

    with user_errors():
        details = show_version(settings, version)
    info = details.info
    click.echo(f"{info.name} version {info.version}")
    click.echo(f"  aliases: {', '.join(info.aliases) or '-'}")
    if info.created:
        click.echo(f"  created: {info.created:%Y-%m-%d %H:%M:%S} UTC")
    if info.description:
        click.echo(f"  description: {info.description}")
    click.echo("lineage:")
    for key, value in details.lineage.items():
        click.echo(f"  {key}: {value}")
    click.echo("params:")
    for key in sorted(details.params):
        click.echo(f"  {key} = {details.params[key]}")
    for line in replay_block(replay_from_metrics(details.metrics)):
        click.echo(line)
    shown = details.metrics
    if not all_metrics:
        wanted = {*KEY_METRICS, "joint.exact_match_rate"}
        wanted |= {
            f"{t}.{m}"
            for t in ("ramcount", "cputime", "iointensity", "walltime")
            for m in ("accuracy", "tail_recall", "under_allocation")
        }
        shown = {k: v for k, v in details.metrics.items() if k in wanted}
    click.echo(
        f"metrics ({len(shown)} of {len(details.metrics)}"
        + ("" if all_metrics else "; --all-metrics for every one")
        + "):"
    )
    for key in sorted(shown):
        click.echo(f"  {key} = {shown[key]:.4f}")
    click.echo("tags:")
    for key in sorted(info.tags):
        click.echo(f"  {key} = {info.tags[key]}")


@model.command("promote")
@click.argument("version", type=click.IntRange(min=1))
@click.option("--reason", required=True, help=REASON_HELP)
@click.pass_obj
def promote_command(settings: Settings, version: int, reason: str) -> None:
    """Make VERSION champion by hand (the old champion becomes 'previous').

    \b
    Example:
      panda-predictor model promote 4 --reason "better ramcount tail, see #12"
    """
    from model_registry.manual import promote
    from panda_predictor.cli.errors import user_errors

    with user_errors():
        move = promote(settings, version, reason)
    click.echo(move.describe())


@model.command("rollback")
@click.option("--reason", required=True, help=REASON_HELP)
@click.pass_obj
def rollback_command(settings: Settings, reason: str) -> None:
    """Make the previous champion champion again.

    \b
    Example:
      panda-predictor model rollback --reason "walltime failures doubled"
    """
    from model_registry.manual import rollback
    from panda_predictor.cli.errors import user_errors

    with user_errors():
        move = rollback(settings, reason)
    click.echo(move.describe())
