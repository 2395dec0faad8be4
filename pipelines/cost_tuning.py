"""Fit the cost policy's parts on a training run: use spreads and the delay price.

Two parts of the decision (docs/decisions.md) come from the deployment's own past,
like the half-life and the combination's settings:

- **the use spread per class** (:class:`~panda_predictor.core.cost_choice.UseTable`):
  quantiles of the training part's label values inside each class;
- **the delay price** (what one core-hour of a job's delay is worth, in core-hours;
  a failed attempt delays its job, so the price sets how careful the values are):
  the served decision runs over the validation part (tasks the trees did not fit
  on, each with the history known before it) once per candidate price of
  :data:`~panda_predictor.core.cost_choice.DELAY_PRICES`; the smallest price at
  which every priced target's values were enough for all but
  :data:`~panda_predictor.core.cost_choice.MAX_SHORT` of the validation tasks is
  kept (the largest where none is). An operator's ``delay_price`` setting wins
  over it at run time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.bins import BinSet
from panda_predictor.core.cost_choice import (
    DELAY_PRICES,
    CostSettings,
    UseTable,
    choose_delay_price,
)
from panda_predictor.serving.bundle import Bundle
from panda_predictor.serving.predictor import Predictor
from pipelines.served_replay import labelled_parts, priced_targets, short_share

#: Validation tasks the delay price is chosen on (the newest ones, at most).
MAX_PRICE_ROWS = 20_000


def use_tables(
    frame: pd.DataFrame, classes: dict[str, np.ndarray], rows: np.ndarray, bins: BinSet
) -> dict[str, UseTable]:
    """Return the use spread per class of every target, from the training ``rows``."""
    return {
        t: UseTable.fit(frame[t].to_numpy(dtype=float)[rows], classes[t][rows], bins[t])
        for t in classes
    }


def choose_price(
    bundle: Bundle,
    val_tasks: pd.DataFrame,
    history: pd.DataFrame,
    prices: tuple[float, ...] = DELAY_PRICES,
) -> tuple[CostSettings, dict[str, Any]]:
    """Return the prices to serve and how short each candidate's values were.

    :param bundle: the trained bundle (use tables and combination already set).
    :param val_tasks: the validation tasks with their labels (the newest
        :data:`MAX_PRICE_ROWS` are used).
    :param history: the labelled history the validation tasks are predicted with
        (each sees only what was known before it, as the hook would).
    """
    tasks = val_tasks.iloc[-MAX_PRICE_ROWS:]
    priced = priced_targets(bundle, tasks)
    if tasks.empty or not priced:
        return bundle.cost, {"delay_price": bundle.cost.delay_price, "tasks": 0}
    parts = labelled_parts(Predictor(bundle, "tuning", "0"), tasks, history)
    short_at: dict[float, dict[str, float]] = {}
    for price in prices:
        cost = replace(bundle.cost, delay_price=price)
        decided = Predictor(bundle, "tuning", "0", cost).decide(
            parts, np.ones(len(tasks), dtype=bool)
        )
        short_at[price] = {}
        for t in priced:
            truth = tasks[t].to_numpy(dtype=float)
            short_at[price][t] = short_share(decided[f"{t}_value"], truth)
    chosen = choose_delay_price(short_at)
    info = {
        "delay_price": chosen,
        "tasks": int(len(tasks)),
        "short_at": {
            f"{p:g}": {t: round(v, 4) for t, v in shares.items()}
            for p, shares in short_at.items()
        },
    }
    return replace(bundle.cost, delay_price=chosen), info
