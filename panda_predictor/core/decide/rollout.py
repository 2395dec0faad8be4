"""Shadow mode and staged rollout: turn a decision into what is actually done.

The predictor decides ``applied`` or ``kept_scouts``; before anything is written,
:func:`route` applies the operator's rollout stage, the same way in the database
hook, the JEDI refiner and the HTTP service:

- ``mode: shadow``: nothing is applied; the task is audited ``shadow`` with what the
  decision would have been ("shadow: would apply", "shadow: would keep scouts: ..."),
  so feedback can compare the predictions with what the scouted jobs really used;
- ``rollout_share`` below 1: only tasks whose :func:`rollout_bucket` falls below the
  share follow the model; the others are audited ``held_back`` (scouts run), again
  with what they would have got, so the two groups can be compared.

The bucket is the first 8 bytes of sha256 of the decimal jediTaskID, read as a
fraction of 2**64: the same task lands in the same group in every process, host and
Python version (``hash()`` is salted per process), and widening the share only adds
tasks to the applied group. Pure Python.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Final, Literal

from panda_predictor.core.domain.task_prediction import TaskPrediction

#: Decision of a task predicted in shadow mode (nothing written, scouts run).
SHADOW: Final[Literal["shadow"]] = "shadow"
#: Decision of a task left out of the rollout share (nothing written, scouts run).
HELD_BACK: Final[Literal["held_back"]] = "held_back"
#: Start of a shadow or held-back reason when the model would have applied.
WOULD_APPLY = "would apply"
#: Start of a shadow or held-back reason when the model would have kept the scouts.
WOULD_KEEP = "would keep scouts"
#: The rollout modes that predict (``legacy``, the kill switch, predicts nothing).
PREDICTING_MODES = ("predict", "shadow")
#: Longest reason the audit table keeps (``reason VARCHAR(400)``).
REASON_LIMIT = 400


def rollout_bucket(jeditaskid: int) -> float:
    """Return the task's fixed place in [0, 1) for the rollout share.

    Parameters
    ----------
    jeditaskid:
        The task's JEDITASKID; its decimal text is hashed.
    """
    if isinstance(jeditaskid, bool) or not isinstance(jeditaskid, int):
        raise ValueError(
            f"The 'jeditaskid' field must be an integer. Got {jeditaskid!r} instead."
        )
    digest = hashlib.sha256(str(jeditaskid).encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def in_rollout(jeditaskid: int, share: float) -> bool:
    """Return whether the task follows the model at this rollout share."""
    check_share(share)
    return rollout_bucket(jeditaskid) < share


def check_share(share: float) -> float:
    """Return ``share`` if it is a number in [0, 1]; raise a clear error otherwise."""
    if isinstance(share, bool) or not isinstance(share, int | float):
        raise ValueError(
            f"The 'rollout_share' field must be a number in [0, 1]. Got {share!r} "
            "instead."
        )
    if not 0.0 <= float(share) <= 1.0:
        raise ValueError(
            f"The 'rollout_share' field must be in [0, 1]. Got {share!r} instead."
        )
    return float(share)


def would_have(prediction: TaskPrediction) -> str:
    """Return what the model's own decision would have done, for the audit reason."""
    if prediction.decision == "applied":
        return WOULD_APPLY
    return f"{WOULD_KEEP}: {prediction.reason}"


def route(prediction: TaskPrediction, mode: str, share: float) -> TaskPrediction:
    """Return the prediction with the decision the rollout stage allows.

    Only the model's own decisions (``applied``, ``kept_scouts``) are routed; a
    decision already routed (a shadow answer of the HTTP service) stays as it is.

    Parameters
    ----------
    prediction:
        What the model decided.
    mode:
        ``predict`` or ``shadow`` (the kill switch never reaches here).
    share:
        The rollout share in [0, 1].
    """
    if mode not in PREDICTING_MODES:
        raise ValueError(
            f"The 'mode' field must be one of {list(PREDICTING_MODES)} to route a "
            f"prediction. Got {mode!r} instead."
        )
    check_share(share)
    if prediction.decision not in ("applied", "kept_scouts"):
        return prediction
    if mode == SHADOW:
        reason = f"shadow: {would_have(prediction)}"
        return dataclasses.replace(
            prediction, decision=SHADOW, reason=reason[:REASON_LIMIT]
        )
    if share >= 1.0 or rollout_bucket(prediction.jeditaskid) < share:
        return prediction
    reason = f"held back (rollout_share={share:g}): {would_have(prediction)}"
    return dataclasses.replace(
        prediction, decision=HELD_BACK, reason=reason[:REASON_LIMIT]
    )


def route_all(
    predictions: list[TaskPrediction], mode: str, share: float
) -> list[TaskPrediction]:
    """Return :func:`route` of each prediction, in order."""
    return [route(p, mode, share) for p in predictions]


def would_apply(reason: str | None) -> bool:
    """Return whether a shadow or held-back audit reason says "would apply"."""
    text = (reason or "").split(": ", 1)
    return len(text) == 2 and text[1].startswith(WOULD_APPLY)
