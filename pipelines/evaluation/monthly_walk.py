"""Walk forward through the labelled history month by month, as production retrains.

The database's data source of :mod:`pipelines.evaluation.walk_forward`: for each of
the last test months, train on every task created before the month (the last
``val_fraction`` of them validates), and score the month with the training's own
evaluation of its test part. Real workloads drift from month to month, so this is
the honest figure on a deployment's own (or the simulated) history.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

from panda_predictor.core.assess.evaluation import MultiTargetEvaluation
from panda_predictor.core.assess.splits import TimeSplit
from panda_predictor.core.bins import BinSet
from panda_predictor.errors import UserInputError
from pipelines.evaluation.walk_forward import walk_periods
from pipelines.training.config import TrainingConfig
from pipelines.training.dataset import LabelledHistory
from pipelines.training.train import train

log = logging.getLogger(__name__)


@dataclass
class MonthResult:
    """Scores of one walk-forward month."""

    month: str
    train_rows: int
    test_rows: int
    evaluation: MultiTargetEvaluation


def walk_forward(
    history: LabelledHistory,
    bins: BinSet,
    config: TrainingConfig,
    n_months: int = 3,
) -> list[MonthResult]:
    """Retrain before each of the last ``n_months`` months and score that month."""
    created = pd.DatetimeIndex(history.frame["creationdate"].to_numpy())
    months = pd.PeriodIndex(created, freq="M")
    present = months.unique().sort_values()
    if len(present) < n_months + 1:
        raise UserInputError(
            f"The history must span at least {n_months + 1} months for {n_months} "
            f"walk-forward months. Got {len(present)} instead."
        )
    ordinals = months.asi8
    first = present[-n_months].ordinal
    test_rows = np.flatnonzero((ordinals >= first) & (ordinals < first + n_months))
    # The months are wall-clock ones, as the PeriodIndex above counts them.
    wall_clock = created.tz_localize(None) if created.tz is not None else created
    retrain = partial(
        _month_result, history=history, bins=bins, config=config, ordinals=ordinals
    )
    walk = walk_periods(wall_clock.to_numpy(), test_rows, "month", retrain)
    return [result for _, result in walk]


def _month_result(
    start: np.datetime64,
    history: LabelledHistory,
    bins: BinSet,
    config: TrainingConfig,
    ordinals: np.ndarray,
) -> tuple[MonthResult, None]:
    """Train on every task before the month of ``start``; score the month's tasks."""
    month = pd.Timestamp(start).to_period("M")
    train_idx = np.flatnonzero(ordinals < month.ordinal)
    test_idx = np.flatnonzero(ordinals == month.ordinal)
    cut = int(len(train_idx) * (1 - config.val_fraction))
    parts = TimeSplit(train_idx[:cut], train_idx[cut:], test_idx)
    log.info("walk-forward %s: train %d, test %d", month, cut, len(test_idx))
    result = train(history, bins, config, parts=parts)
    return MonthResult(str(month), cut, len(result.test_tasks), result.served), None


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
