"""A progress bar per model fit: rounds or epochs done, and training throughput.

A four-target training on millions of tasks runs for minutes with nothing to show.
:class:`FitProgress` gives each fit (a target, a model kind, a candidate half-life)
a bar that advances with every boosting round (XGBoost) or epoch (Keras) through
the models' ``on_step`` hook, and shows the training rows and the rows processed
per second (rows times rounds, since every round visits every row). Disabled, it
costs nothing and the fit gets no hook.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm.auto import tqdm


class FitProgress:
    """Make one progress bar per fit; ``enabled=False`` makes none."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled

    @contextmanager
    def fit(
        self, label: str, rows: int, steps: int, unit: str = "round"
    ) -> Iterator[Callable[[int], None] | None]:
        """Yield the ``on_step(done)`` hook of one fit of ``rows`` rows (or None)."""
        if not self.enabled:
            yield None
            return
        bar = tqdm(total=steps, desc=label, unit=unit, leave=False, dynamic_ncols=True)
        started = time.perf_counter()

        def on_step(done: int) -> None:
            bar.update(done - bar.n)
            elapsed = max(time.perf_counter() - started, 1e-9)
            bar.set_postfix_str(
                f"{rows:,} rows, {rows * done / elapsed:,.0f} rows/s", refresh=False
            )

        try:
            yield on_step
        finally:
            bar.close()
