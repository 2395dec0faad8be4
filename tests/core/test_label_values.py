"""PanDA's margins, rounding and units on per-task aggregates, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.label_values import (
    AGGREGATE_COLUMNS,
    LABEL_COLUMNS,
    finalize_labels,
    labels_from_aggregates,
)

MB = 1024 * 1024


def one_task(**units):
    return finalize_labels(
        ram_kb=np.array([1_000_000.0]),
        cpu_per_event=np.array([4.0]),
        io_kb_per_s=np.array([12.3]),
        max_cpu_s=np.array([7200.0]),
        max_input_bytes=np.array([2.0 * MB]),
        **units,
    )


def test_one_task_is_rounded_as_panda_rounds_it():
    out = one_task()
    # 1,000,000 kB x 110 // 100 / 1024 = 1074.2 -> 1074 (down).
    assert out["ramcount"][0] == 1074 and out["ramcount_unit"][0] == "MBPerCore"
    # 4.0 x 1.5 = 6 HS06sPerEvent: below 10, written x1000.
    assert out["cputime"][0] == pytest.approx(6.0)
    assert out["cputime_value"][0] == 6000
    assert out["cputime_unit"][0] == "mHS06sPerEvent"
    assert out["iointensity"][0] == 13  # rounded up
    assert out["walltime"][0] == 5400  # 7200 s / 2 MB x 1.5


def test_a_task_not_per_core_gets_mb_and_no_normalised_ramcount():
    out = one_task(ramunit=np.array(["MB"], dtype=object))
    assert np.isnan(out["ramcount"][0]) and out["ramcount_value"][0] == 1074
    assert out["ramcount_unit"][0] == "MB"


def test_aggregates_become_the_labels_frame():
    row = dict.fromkeys(AGGREGATE_COLUMNS)
    row.update(
        jeditaskid=7,
        ram_kb=1_000_000.0,
        cpu_per_event=40.0,
        io_kb_per_s=1.0,
        max_cpu_s=100.0,
        max_input_bytes=MB,
        n_scouts=3,
        labels_known_at=pd.Timestamp("2025-03-01"),
        ramunit="MBPerCore",
        cputimeunit="HS06sPerEvent",
    )
    frame = labels_from_aggregates(pd.DataFrame([row]))
    assert list(frame.columns) == list(LABEL_COLUMNS)
    assert frame["cputime"].iloc[0] == 60.0
    assert frame["cputime_unit"].iloc[0] == "HS06sPerEvent"
    assert frame["walltime"].iloc[0] == 0.0  # under an hour of CPU: 0
    assert frame["n_scouts"].iloc[0] == 3
