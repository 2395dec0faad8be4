"""The recency rules as experts, on hand-made and random history features."""

from __future__ import annotations

import numpy as np
import pandas as pd

from panda_predictor.core.decide.experts import EXPERTS
from panda_predictor.core.decide.recency_rules import (
    expert_classes,
    rule_table,
    rule_values,
)
from panda_predictor.core.features.matrix_columns import MatrixColumns


def rule_input_names(targets: list[str]) -> list[str]:
    """Return the history-feature and request columns the rules of ``targets``
    read (iointensity has no request column)."""
    return [
        f"hist_{g}_{t}_{stat}"
        for g in ("user", "user_transformation")
        for t in targets
        for stat in ("mean2", "p75", "p95", "max_ratio5")
    ] + ["requested_ramcount", "requested_walltime"]


def test_rule_table_of_several_targets_is_each_targets_rules(seed):
    rng = np.random.default_rng(seed)
    targets = ["ramcount", "walltime", "iointensity"]
    names = rule_input_names(targets)
    values = rng.lognormal(3, 1, size=(30, len(names)))
    values[rng.random(values.shape) < 0.3] = np.nan
    values[:3, -2:] = -1.0  # a request <= 0 is no request
    X = pd.DataFrame(values, columns=names)
    table = rule_table(X, targets, margin=0.1)
    assert table.shape == (30, 3, len(EXPERTS) - 1)
    for i, target in enumerate(targets):
        one = rule_values(X, target, margin=0.1)
        for j, name in enumerate(EXPERTS[1:]):
            np.testing.assert_array_equal(table[:, i, j], one[name])
    assert np.isnan(table[:, 2, 3]).all()  # iointensity has no request: no ratio


def test_rule_values_use_the_key_then_the_user_and_the_request():
    X = pd.DataFrame(
        {
            "hist_user_walltime_mean2": [100.0, np.nan],
            "hist_user_walltime_p75": [50.0, 70.0],
            "hist_user_transformation_walltime_p75": [np.nan, 80.0],
            "hist_user_walltime_max_ratio5": [0.5, 0.5],
            "requested_walltime": [1000.0, np.nan],
        }
    )
    out = rule_values(X, "walltime", margin=0.1)
    np.testing.assert_allclose(out["last2"], [100.0, np.nan])
    np.testing.assert_allclose(out["key_p75"], [55.0, 88.0])
    np.testing.assert_allclose(out["ratio"], [500.0, np.nan])
    assert np.isnan(out["key_p95"]).all()  # no such statistic: no value
    expert = expert_classes(np.array([0, 1]), out, lambda v: np.where(
        np.isnan(v), -1, (np.nan_to_num(v) > 60).astype(int)))  # fmt: skip
    assert expert.tolist() == [[0, 1, 0, -1, 1], [1, -1, 1, -1, -1]]


def test_one_task_gets_its_rows_rule_values_to_the_bit(seed):
    """The one-task route (a one-row code matrix read as MatrixColumns) gives the
    batch's rule values exactly, NaN where a rule abstains."""
    rng = np.random.default_rng(seed)
    targets = ["ramcount", "walltime", "iointensity"]
    names = [*rule_input_names(targets), "other"]
    matrix = rng.lognormal(3, 1, size=(200, len(names))).astype(np.float32)
    matrix[rng.random(matrix.shape) < 0.3] = np.nan
    matrix[:20, -3] = -1.0  # a request <= 0 is no request
    matrix[20:40, -3] = 0.0
    positions = {name: j for j, name in enumerate(names)}
    batch = rule_table(MatrixColumns(matrix, positions), targets, margin=0.1)
    for i in range(len(matrix)):
        one = rule_table(MatrixColumns(matrix[i : i + 1], positions), targets, 0.1)
        assert one.shape == (1, 3, len(EXPERTS) - 1)
        np.testing.assert_array_equal(one[0], batch[i])
    # the request column absent from the matrix: no ratio, as in the batch
    del positions["requested_walltime"]
    one = rule_table(MatrixColumns(matrix[:1], positions), targets, 0.1)
    assert np.isnan(one[0, 1, 3])
