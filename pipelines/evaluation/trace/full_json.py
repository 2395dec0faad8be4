"""What the figure commands share: reading a benchmark's full.json and naming its log.

``panda-predictor benchmark`` writes ``<home>/benchmarks/<log>/full.json``; the
Pareto and reliability figures read one or more of them from the command line.
:func:`figure_parser` gives both the same arguments and help, :func:`read_full_json`
the same one-line errors, :func:`log_name` the same names.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from panda_predictor.errors import UserInputError
from panda_predictor.ingest.swf import trace_name


def log_name(full: dict[str, Any], source: Path) -> str:
    """Return the short name of the log of ``full`` (else the folder of ``source``)."""
    if not full.get("file"):
        return source.resolve().parent.name
    dev = bool(full.get("split", {}).get("development_run"))
    # The benchmark's own folder name: a development run is "<log>-dev".
    return trace_name(str(full["file"])) + ("-dev" if dev else "")


def read_full_json(path: Path) -> dict[str, Any]:
    """Return the parsed full.json at ``path``; raise a one-line error if it is not."""
    if not path.is_file():
        raise UserInputError(
            f"The FULL_JSON file must exist (a benchmark's full.json). Got "
            f"{str(path)!r}, which does not exist, instead."
        )
    try:
        document = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserInputError(
            f"The FULL_JSON file must hold JSON. Got {str(path)!r}: {exc}."
        ) from None
    if not isinstance(document, dict):
        raise UserInputError(
            f"The FULL_JSON file must hold a JSON object. Got "
            f"{type(document).__name__} in {str(path)!r} instead."
        )
    return document


def figure_parser(
    module: str, doc: str, out_metavar: str, out_help: str, example_out: str
) -> argparse.ArgumentParser:
    """Return the parser of a figure command: FULL_JSON files and ``-o/--out``.

    ``module`` is the command's module (its ``prog``), ``doc`` its docstring (the
    first paragraph is the description), ``example_out`` the ``-o`` of the
    epilog's example.
    """
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=doc.split("\n\n")[0].replace("\n", " "),
        epilog=(
            "Each FULL_JSON is a benchmark's full.json ('panda-predictor "
            "benchmark' writes <home>/benchmarks/<log>/full.json). The log's name "
            "is its 'file' field (else the file's folder), with '-dev' for a "
            f"--dev run. Example: python -m {module} "
            f"/tmp/tr/benchmarks/*/full.json -o {example_out}"
        ),
    )
    parser.add_argument(
        "full_json", nargs="+", type=Path, metavar="FULL_JSON", help="full.json"
    )
    parser.add_argument(
        "-o", "--out", type=Path, required=True, metavar=out_metavar, help=out_help
    )
    return parser
