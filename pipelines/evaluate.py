"""Evaluate models the way production uses them.

Two modes:

- :func:`evaluate_champion` scores the registered champion on the newest part of the
  history (the same time-ordered test part training uses), without training.
- :func:`walk_forward` mirrors production: for each test month, train on everything
  before the month (the last ``val_fraction`` of it validates), predict the month.
  Real workloads drift from month to month, so this is the honest figure.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from panda_predictor.bins_file import bins_from_settings
from panda_predictor.core.assess.evaluation import (
    MultiTargetEvaluation,
    all_correct,
    evaluate_targets,
)
from panda_predictor.core.assess.splits import (
    TimeSplit,
    time_ordered_split,
    walk_forward_months,
)
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.tail_rule import CoverageCurve, coverage_accuracy_curve
from panda_predictor.db.engine import make_engine
from panda_predictor.errors import UserInputError
from panda_predictor.serving.loader import load_champion
from panda_predictor.settings import Settings
from pipelines.dataset import LabelledHistory, read_labelled_history
from pipelines.train import TrainingConfig, class_labels, train
from pipelines.training_report import write_report

log = logging.getLogger(__name__)


@dataclass
class MonthResult:
    """Scores of one walk-forward month."""

    month: str
    train_rows: int
    test_rows: int
    evaluation: MultiTargetEvaluation


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


def walk_forward(
    history: LabelledHistory,
    bins: BinSet,
    config: TrainingConfig,
    n_months: int = 3,
) -> list[MonthResult]:
    """Retrain before each of the last ``n_months`` months and score that month."""
    times = history.frame["creationdate"].to_numpy()
    months = pd.PeriodIndex(pd.DatetimeIndex(times), freq="M").unique().sort_values()
    if len(months) < n_months + 1:
        raise UserInputError(
            f"The history must span at least {n_months + 1} months for {n_months} "
            f"walk-forward months. Got {len(months)} instead."
        )
    first = str(months[-n_months])
    results = []
    for month, train_idx, test_idx in walk_forward_months(times, first, n_months):
        cut = int(len(train_idx) * (1 - config.val_fraction))
        parts = TimeSplit(train_idx[:cut], train_idx[cut:], test_idx)
        log.info("walk-forward %s: train %d, test %d", month, cut, len(test_idx))
        result = train(history, bins, config, parts=parts)
        results.append(MonthResult(month, cut, len(result.test_tasks), result.served))
    return results


def walk_forward_table(results: list[MonthResult]) -> pd.DataFrame:
    """Return one row per month: accuracy per target, exact match, under-allocation."""
    rows = []
    for r in results:
        row: dict[str, object] = {
            "month": r.month,
            "train": r.train_rows,
            "test": r.test_rows,
        }
        for name, ev in r.evaluation.targets.items():
            row[f"{name} acc"] = ev.accuracy
            row[f"{name} under"] = ev.under_allocation_rate
        row["exact match"] = r.evaluation.exact_match_rate
        rows.append(row)
    return pd.DataFrame(rows)


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
