"""``panda-predictor predict TASK.json``: what would the plugin do with this task?

For scientists checking a task definition before submitting it: prints per target
the class, its range and unit, the value that would be requested, the confidence,
whether scouts would be skipped and the features that drove it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from panda_predictor.settings import Settings


def _range(t: dict[str, Any]) -> str:
    if t["lower"] is None and t["upper"] is None:
        return "any"
    if t["lower"] is None:
        return f"< {t['upper']:g}"
    if t["upper"] is None:
        return f">= {t['lower']:g}"
    return f"{t['lower']:g} - {t['upper']:g}"


def render_text(results: list[dict[str, Any]]) -> str:
    """Return the predictions as readable text, one block per task."""
    blocks = []
    for r in results:
        skipped = r["scouts"] == "skipped"
        lines = [
            f"Task {r['jediTaskID']} - model {r['model']['name']} "
            f"version {r['model']['version']}",
            f"  Scouts would be {'SKIPPED' if skipped else 'KEPT'} "
            f"({r['decision']}): {r['reason']}",
            f"  {'target':<12} {'class':<18} {'range':<22} {'unit':<14} "
            f"{'request':>8} {'confidence':>10}",
        ]
        for name, t in r["targets"].items():
            lines.append(
                f"  {name:<12} {t['class_label']:<18} {_range(t):<22} "
                f"{t['unit']:<14} {t['value']:>8} {t['confidence']:>10.2f}"
            )
        lines.append("  Why these classes:")
        for name, t in r["targets"].items():
            lines.append(f"    {name:<12} {t['choice']}")
        lines.append("  Features that drove it (contribution to the chosen class):")
        for name, t in r["targets"].items():
            shown = (
                ", ".join(
                    f"{f['feature']}={f['value']} ({f['contribution']:+.2f})"
                    for f in t["top_features"][:3]
                )
                or t["explanation"]
            )
            lines.append(f"    {name:<12} {shown}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


@click.command("predict")
@click.argument("task_file", metavar="TASK_FILE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@click.option(
    "--bundle",
    "bundle_dir",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Use this bundle folder instead of the champion.",
)
@click.pass_obj
def predict(
    settings: Settings, task_file: str, as_json: bool, bundle_dir: str | None
) -> None:
    """Show what panda-predictor would request for a task definition.

    TASK_FILE is a .json, .yaml or .yml file (or '-' for stdin) holding one task
    definition or a list, with our names or PanDA's task parameter-map names
    (processingType, transPath, transHome, transUses, coreCount, prodSourceLabel,
    nFiles, nEvents or inDS, ...). Other parameter-map keys such as taskName are
    ignored; an unknown key is an error.

    \b
    Examples:
      panda-predictor predict task.json
      panda-predictor predict task.yaml --json
      cat task.json | panda-predictor predict -
    """
    from panda_predictor.cli.errors import user_errors
    from panda_predictor.cli.inputs import predictor_for, read_definitions_file
    from panda_predictor.http_api.results import predict_tasks
    from panda_predictor.taskdef import parse_task_definitions, task_records

    with user_errors():
        stdin = sys.stdin.read() if task_file == "-" else None
        tasks = task_records(
            parse_task_definitions(read_definitions_file(task_file, stdin))
        )
        results = predict_tasks(predictor_for(settings, bundle_dir), tasks)
    if as_json:
        click.echo(json.dumps({"predictions": results}, indent=1))
    else:
        click.echo(render_text(results))
        click.echo(
            "\nHistory features are not used here (no database): the service and "
            "the hook may be more confident for tasks similar to recent ones."
        )
