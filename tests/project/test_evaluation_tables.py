"""docs/evaluation.md shows the test-part run kept in benchmarks/test-base.

Its six tables (goal, choices, replay, calibration, hindsight, methods) are made
by ``pipelines.evaluation.trace.summary`` from the ten logs' ``full.json``; the
run is kept in the repository, so a page edited by hand, or a run replaced
without the page (or the reverse), fails here instead of going unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.evaluation.trace.summary import updated_doc

ROOT = Path(__file__).resolve().parents[2]
TEST_BASE = ROOT / "benchmarks" / "test-base"
PAGE = ROOT / "docs" / "evaluation.md"
#: The job logs of ../shared/data/traces the page reports.
N_LOGS = 10


def test_the_evaluation_page_holds_the_kept_runs_tables():
    files = sorted(TEST_BASE.glob("*/full.json"))
    assert len(files) == N_LOGS, f"{TEST_BASE} must hold one full.json per log"
    assert not any(f.parent.name.endswith("-dev") for f in files)
    page = PAGE.read_text()
    documents = [json.loads(f.read_text()) for f in files]
    assert updated_doc(page, documents) == page, (
        "docs/evaluation.md's tables differ from benchmarks/test-base: run "
        "python -m pipelines.evaluation.trace.summary --update docs/evaluation.md "
        "benchmarks/test-base/*/full.json"
    )
