"""The ``evaluate`` runner: score the champion, or walk forward, on the database.

Two modes, each written as a report:

- :func:`evaluate_champion` scores the registered champion on the newest part of the
  history (the same time-ordered test part training uses), without training.
- the walk forward (:mod:`pipelines.evaluation.monthly_walk`) mirrors production:
  for each test month, retrain on everything before the month, predict the month.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from panda_predictor.bins_file import bins_from_settings
from panda_predictor.core.assess.evaluation import (
    MultiTargetEvaluation,
    all_correct,
    evaluate_targets,
)
from panda_predictor.core.assess.splits import time_ordered_split
from panda_predictor.core.decide.tail_rule import CoverageCurve, coverage_accuracy_curve
from panda_predictor.db.engine import make_engine
from panda_predictor.serving.loader import load_champion
from panda_predictor.settings import Settings
from pipelines.evaluation.monthly_walk import walk_forward, walk_forward_table
from pipelines.training.config import TrainingConfig
from pipelines.training.dataset import LabelledHistory, read_labelled_history
from pipelines.training.report import write_report
from pipelines.training.train import class_labels

log = logging.getLogger(__name__)


def evaluate_champion(
    settings: Settings, history: LabelledHistory, test_fraction: float = 0.15
) -> tuple[MultiTargetEvaluation, dict[str, object]]:
    """Score the champion on the newest ``test_fraction`` of the history."""
    predictor = load_champion(settings)
    parts = time_ordered_split(
        history.frame["creationdate"].to_numpy(),
        1 - test_fraction - 1e-9,
        0.0,
        test_fraction,
    )
    test = history.frame.iloc[parts.test]
    y = class_labels(test, predictor.bundle.bins)
    known = np.all([y[t] >= 0 for t in y], axis=0)
    test = test[known]
    _, chosen, conf = predictor.classify(test, history.history)
    y = {t: v[known] for t, v in y.items()}
    evaluation = evaluate_targets(
        y,
        chosen,
        {t: predictor.bundle.bins[t].n_classes for t in y},
        {t: list(predictor.bundle.bins[t].labels) for t in y},
    )
    weakest = np.min(np.vstack([conf[t] for t in y]), axis=0)
    info = {
        "model": f"{predictor.model_name} v{predictor.model_version}",
        "test rows": int(len(test)),
        "test period": f"{test['creationdate'].min()} .. {test['creationdate'].max()}",
        "coverage": coverage_accuracy_curve(weakest, all_correct(y, chosen)),
    }
    return evaluation, info


def run_evaluation(
    settings: Settings,
    out_dir: Path,
    walk_forward_months_: int | None = None,
    config: TrainingConfig | None = None,
    progress: bool = True,
) -> tuple[Path, pd.DataFrame | None]:
    """Evaluate the champion, or walk forward, on the database; write a report."""
    config = config or TrainingConfig()
    engine = make_engine(settings)
    history = read_labelled_history(engine, settings, progress=progress)
    engine.dispose()
    if walk_forward_months_ is None:
        evaluation, info = evaluate_champion(settings, history)
        coverage: CoverageCurve = info.pop("coverage")  # type: ignore[assignment]
        report = write_report(
            out_dir,
            {str(info["model"]): evaluation},
            None,
            {str(info["model"]): coverage},
            metadata=info,
            title="panda-predictor evaluation of the champion",
        )
        return report, None
    bins = bins_from_settings(settings)
    results = walk_forward(history, bins, config, walk_forward_months_)
    table = walk_forward_table(results)
    evaluations = {f"month {r.month}": r.evaluation for r in results}
    report = write_report(
        out_dir,
        evaluations,
        None,
        None,
        metadata={
            "mode": "walk-forward (retrain before each month)",
            "kinds": ", ".join(config.model_kinds),
        },
        title="panda-predictor walk-forward evaluation",
    )
    with report.open("a", encoding="utf-8") as fh:
        fh.write("\n## Month by month\n\n" + markdown_table(table) + "\n")
    return report, table


def markdown_table(table: pd.DataFrame) -> str:
    """Return ``table`` as a Markdown table, floats with 3 decimals."""

    def cell(value: object) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    lines = [
        "| " + " | ".join(map(str, table.columns)) + " |",
        "|" + "---|" * len(table.columns),
    ]
    lines += [
        "| " + " | ".join(cell(v) for v in row) + " |"
        for row in table.itertuples(index=False)
    ]
    return "\n".join(lines)
