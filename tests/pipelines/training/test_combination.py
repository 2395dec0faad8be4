"""The combination's tuning grid and the allocation figures it judges by."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.training.combination import allocation, candidates


def test_every_candidate_is_distinct():
    grid = candidates()
    assert len(grid) == len(set(grid)) > 1


def test_allocation_counts_short_classes_and_classes_too_many():
    truth = np.array([0, 1, 2, 3])
    classes = np.array([0, 0, 3, 3])  # one short, one a class too high
    under, over = allocation(classes, truth)
    assert under == pytest.approx(0.25)
    assert over == pytest.approx(0.25)
