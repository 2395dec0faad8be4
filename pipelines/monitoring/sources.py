"""Where the monitoring report finds what it shows, besides the database.

Every training run (``train``, ``retrain``, the demo) writes its report folder under
``<home>/reports/`` with ``report.md`` and the gate's verdict ``gate.json``; the
newest ``gate.json`` is the latest challenger-versus-champion comparison. Drift
checks leave ``<home>/monitoring/drift-*.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_registry.gate import SCOUTS
from model_registry.replay_table import Replay, replay_of

#: File the training runs write next to their report with the gate's verdict.
GATE_FILE = "gate.json"
#: The training report's page in its folder.
TRAINING_REPORT_FILE = "report.md"


@dataclass(frozen=True)
class GateResult:
    """The latest gate verdict: versions, decision and one row per metric."""

    version: int | None
    champion_version: int | None
    promoted: bool
    reason: str
    rows: list[dict[str, Any]]
    folder: Path
    #: The challenger's decision replayed against the scouts on its test tasks
    #: (no rows: its gate.json did not keep the evidence).
    replay: Replay = Replay()


def latest_drift(home: Path) -> dict[str, Any] | None:
    """Return the newest drift check JSON under ``<home>/monitoring``, if any."""
    files = sorted((home / "monitoring").glob("drift-*.json"))
    return json.loads(files[-1].read_text()) if files else None


def _report_folders(home: Path, marker: str) -> list[Path]:
    """Return folders under ``<home>/reports`` holding ``marker``, newest first."""
    found = (home / "reports").glob(f"*/{marker}")
    return [p.parent for p in sorted(found, key=lambda p: p.stat().st_mtime)][::-1]


def training_reports(home: Path, last: int = 5) -> list[Path]:
    """Return the ``last`` newest training reports (``report.md``), newest first."""
    return [
        f / TRAINING_REPORT_FILE for f in _report_folders(home, TRAINING_REPORT_FILE)
    ][:last]


def latest_gate(home: Path) -> GateResult | None:
    """Return the newest gate verdict under ``<home>/reports``, or None if none ran."""
    folders = _report_folders(home, GATE_FILE)
    if not folders:
        return None
    data = json.loads((folders[0] / GATE_FILE).read_text())
    decision = data.get("decision", {})
    rows = [
        {
            "metric": v["metric"],
            "challenger": v.get("challenger"),
            "champion": v.get("champion"),
            "tolerance": v.get("tolerance"),
            "better": v.get("better"),
            "verdict": "ok"
            if v.get("passed_champion") is not False
            and v.get("passed_floor") is not False
            else "FAILED",
        }
        for v in decision.get("verdicts", [])
    ]
    evidence = data.get("evidence") or {}
    scouts = (evidence.get("floors") or {}).get(SCOUTS) or {}
    replay = replay_of(evidence.get("challenger") or {}, scouts)
    return GateResult(
        version=data.get("version"),
        champion_version=decision.get("champion_version"),
        promoted=bool(decision.get("promoted")),
        reason=str(decision.get("reason", "")),
        rows=rows,
        folder=folders[0],
        replay=replay,
    )
