"""Refuse task rows whose numbers no real task can have, before predicting them.

The refiner and the HTTP service read task definitions through
:mod:`panda_predictor.taskdef`, which refuses a core count outside 1..1024 and
negative counts. The database hook reads JEDI_TASKS rows instead; this module holds
the same rules for a row, so a task with ``corecount = -3`` keeps its scouts with a
reason naming the field, what was expected and what came, in both paths.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: The largest core count a task definition may ask for (as taskdef).
MAX_CORECOUNT = 1024
#: Counts that must be non-negative integers where known.
COUNT_FIELDS = ("n_input_datasets", "nfiles_sum", "nevents_sum")
#: The fields :func:`input_problem` reads.
CHECKED_FIELDS = ("corecount", *COUNT_FIELDS)


def _known(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _shown(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return repr(int(value))
    return repr(value)


def _integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        return float(value).is_integer()
    except (TypeError, ValueError):
        return False


def input_problem(task: Mapping[str, Any]) -> str | None:
    """Return what is wrong with a task row's numbers, or None when they can be used.

    Parameters
    ----------
    task:
        A JEDI_TASKS row with its input-dataset counts (lower-case names); NULL
        (None or NaN) is "unknown" and allowed, as at refine time.
    """
    corecount: Any = task.get("corecount")
    if _known(corecount):
        if not _integer(corecount) or float(corecount) <= 0:
            return (
                f"The 'corecount' field must be a positive integer. "
                f"Got {_shown(corecount)} instead."
            )
        if float(corecount) > MAX_CORECOUNT:
            return (
                f"The 'corecount' field must be at most {MAX_CORECOUNT}. "
                f"Got {_shown(corecount)} instead."
            )
    for name in COUNT_FIELDS:
        value: Any = task.get(name)
        if _known(value) and (not _integer(value) or float(value) < 0):
            return (
                f"The '{name}' field must be a non-negative integer. "
                f"Got {_shown(value)} instead."
            )
    return None
