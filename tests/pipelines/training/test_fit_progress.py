"""The per-fit progress bar: none when disabled, one that follows the rounds."""

from __future__ import annotations

from pipelines.training import fit_progress
from pipelines.training.fit_progress import FitProgress


class RecordingBar:
    """A stand-in for tqdm that records what the hook tells it."""

    made: list[RecordingBar] = []

    def __init__(self, total: int, desc: str, **_: object) -> None:
        self.total, self.desc, self.n = total, desc, 0
        self.postfix, self.closed = "", False
        RecordingBar.made.append(self)

    def update(self, step: int) -> None:
        self.n += step

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text

    def close(self) -> None:
        self.closed = True


def test_disabled_gives_no_hook():
    with FitProgress(enabled=False).fit("ramcount xgboost", rows=10, steps=5) as hook:
        assert hook is None


def test_enabled_hook_follows_the_rounds(monkeypatch):
    monkeypatch.setattr(fit_progress, "tqdm", RecordingBar)
    with FitProgress().fit("walltime xgboost", rows=1000, steps=4) as on_step:
        assert on_step is not None
        on_step(1)
        on_step(3)  # rounds done so far, not a step
    bar = RecordingBar.made[-1]
    assert (bar.desc, bar.total, bar.n, bar.closed) == ("walltime xgboost", 4, 3, True)
    assert bar.postfix.startswith("1,000 rows, ") and bar.postfix.endswith("rows/s")
