"""PanDA's memory steps, as panda-server's ``increase_memory`` has them."""

from __future__ import annotations

from panda_predictor.core.domain.memory_steps import MEMORY_STEPS_MB


def test_the_steps_are_pandas():
    assert MEMORY_STEPS_MB == (1000, 2000, 3000, 4000, 6000, 8000)


def test_the_steps_ascend():
    assert list(MEMORY_STEPS_MB) == sorted(set(MEMORY_STEPS_MB))
