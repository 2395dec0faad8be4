"""What one pass of the submit hook did, as a report and as its one summary line."""

from __future__ import annotations

from dataclasses import dataclass, field

from panda_predictor.core.domain.task_prediction import TaskPrediction


@dataclass
class HookReport:
    """What one pass did: the predictions made and what was written."""

    predictions: list[TaskPrediction] = field(default_factory=list)
    applied: list[int] = field(default_factory=list)
    kept_scouts: list[int] = field(default_factory=list)
    moved_by_jedi: list[int] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)
    locked_by_jedi: list[int] = field(default_factory=list)
    shadow: list[int] = field(default_factory=list)
    held_back: list[int] = field(default_factory=list)
    #: Audited ``kept_scouts``: the SPLITRULE cannot be edited safely.
    malformed_splitrule: list[int] = field(default_factory=list)
    #: Left untouched and unaudited: the kill switch came on during the pass.
    stopped_by_kill_switch: list[int] = field(default_factory=list)
    #: Running tasks asked to be re-measured after their first finished jobs
    #: (:mod:`panda_predictor.db.early_remeasure`): not audited anew.
    remeasured_early: list[int] = field(default_factory=list)
    failure: str | None = None
    dry_run: bool = False

    @property
    def written(self) -> int:
        """Return how many tasks got an audit row in this pass."""
        return (
            len(self.applied)
            + len(self.kept_scouts)
            + len(self.moved_by_jedi)
            + len(self.errors)
            + len(self.shadow)
            + len(self.held_back)
            + len(self.malformed_splitrule)
        )


#: The lists of :class:`~panda_predictor.db.writer.WriteResult` that a committed
#: batch adds to the report and counts.
COUNTED = (
    "applied",
    "kept_scouts",
    "moved_by_jedi",
    "locked_by_jedi",
    "shadow",
    "held_back",
    "malformed_splitrule",
)
#: The lists of :class:`~panda_predictor.db.writer.WriteResult` of the tasks a
#: committed transaction dealt with.
HANDLED = (*COUNTED, "already_audited")


#: Outcomes the summary line names even at 0 (the rest only when they happened).
_ALWAYS_COUNTED = frozenset(
    {
        "applied",
        "kept scouts",
        "moved by JEDI meanwhile",
        "errors (audited, scouts run)",
    }
)


def pass_summary(report: HookReport) -> str:
    """Return the one line that counts what a pass did, every outcome included.

    The errors and the tasks left for the next pass are counted too: a summary
    that leaves them out reads as a clean pass when it was not.
    """
    counts = [
        (len(report.applied), "applied"),
        (len(report.kept_scouts), "kept scouts"),
        (len(report.malformed_splitrule), "kept scouts for a malformed SPLITRULE"),
        (len(report.shadow), "shadow (scouts run)"),
        (len(report.held_back), "held back (scouts run)"),
        (len(report.moved_by_jedi), "moved by JEDI meanwhile"),
        (len(report.locked_by_jedi), "locked by JEDI (retried next pass)"),
        (len(report.errors), "errors (audited, scouts run)"),
        (len(report.stopped_by_kill_switch), "stopped by the kill switch"),
        (len(report.remeasured_early), "running tasks asked to be re-measured early"),
    ]
    return ", ".join(
        f"{count} {name}" for count, name in counts if count or name in _ALWAYS_COUNTED
    )
