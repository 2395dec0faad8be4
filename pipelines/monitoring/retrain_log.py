"""The retraining decision log: one JSON line per run in ``<home>/retrain/``.

:mod:`pipelines.retraining.retrain` appends to it and
:mod:`pipelines.monitoring.report` shows its last lines. It lives with the monitoring
so that the report reads the log without importing the retraining run (which sits
above the monitoring and imports the report to write its summary page).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from panda_predictor.settings import Settings

#: File of the log under ``<home>/retrain``.
DECISIONS_FILE = "decisions.jsonl"


def append_decision(settings: Settings, record: Mapping[str, Any]) -> None:
    """Append one retraining decision (a JSON-ready mapping) to the log.

    Parameters
    ----------
    settings:
        Settings naming the home folder.
    record:
        The decision, as
        :meth:`pipelines.retraining.retrain.RetrainOutcome.to_dict` returns it.
    """
    folder = settings.home / "retrain"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / DECISIONS_FILE).open("a") as fh:
        fh.write(json.dumps(record, default=str) + "\n")


def read_decisions(settings: Settings, last: int = 20) -> list[dict[str, Any]]:
    """Return the last ``last`` retraining decisions, oldest first."""
    path = settings.home / "retrain" / DECISIONS_FILE
    if not path.is_file():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return [json.loads(line) for line in lines[-last:]]
