"""A progress bar for a Spark job: its finished tasks, and job rows per second.

Spark's own console bar is off (it interleaves with our logs); this polls the
driver's status tracker from a thread and draws one tqdm bar on stderr instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tqdm import tqdm


@contextmanager
def spark_progress(spark: Any, job_rows: int, enabled: bool = True) -> Iterator[None]:
    """Show the share of Spark tasks done, scaled to ``job_rows``, while the block runs.

    The bar's rate is thus job rows per second; its total grows as Spark plans
    more stages, so it is an estimate until the last stage starts.
    """
    if not enabled:
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()
    seen: dict[int, tuple[int, int]] = {}

    def poll(bar: tqdm) -> None:
        while not stop.wait(0.5):
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    seen[stage_id] = (info.numCompletedTasks, info.numTasks)
            done = sum(d for d, _ in seen.values())
            total = sum(t for _, t in seen.values()) or 1
            bar.n = int(job_rows * done / total)
            bar.refresh()

    with tqdm(desc="spark labels", unit="row", total=job_rows) as bar:
        thread = threading.Thread(target=poll, args=(bar,), daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            bar.n = job_rows
            bar.refresh()
