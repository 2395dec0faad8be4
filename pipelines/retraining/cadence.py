"""When the next retraining is due: the cadence each model chose from its own past.

Training chooses how often to retrain from the deployment's own validation tasks
(:func:`pipelines.training.self_tuning.choose_cadence`: how fast accuracy falls with the
model's age). Every registered version carries that choice and the end of the data
it was trained on as two version tags. ``retrain --cadence auto`` (the default) runs
from a daily timer and trains only when the newest trained data is at least the
chosen number of days old; otherwise the run is recorded as ``skipped_not_due``.

The newest *trained* version counts, not only the champion: a challenger the gate
refused was still trained on that data, so a daily timer does not retrain every day
after a refusal. The cadence itself comes from the champion (the model in service),
or from the newest version when there is no champion yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from panda_predictor.settings import Settings

#: Version tag: the retraining cadence (days) that training chose.
EVERY_DAYS_TAG = "cadence.retrain_every_days"
#: Version tag: the end of the data the version was trained on (ISO time, UTC).
DATA_UNTIL_TAG = "data.until"


def cadence_tags(every_days: int | None, data_until: datetime) -> dict[str, str]:
    """Return the version tags that record a training's cadence and data end."""
    tags = {DATA_UNTIL_TAG: data_until.isoformat()}
    if every_days is not None:
        tags[EVERY_DAYS_TAG] = str(int(every_days))
    return tags


@dataclass(frozen=True)
class DueCheck:
    """Whether a retraining is due now, and why (for the decision log)."""

    due: bool
    reason: str
    every_days: int | None = None
    trained_until: datetime | None = None

    @property
    def next_due(self) -> datetime | None:
        """Return when the next retraining falls due, if a cadence is known."""
        if self.every_days is None or self.trained_until is None:
            return None
        return self.trained_until + timedelta(days=self.every_days)


def _parse_until(tags: dict[str, str]) -> datetime | None:
    text = tags.get(DATA_UNTIL_TAG)
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).replace(tzinfo=None)
    except ValueError:
        return None


def _parse_days(tags: dict[str, str]) -> int | None:
    text = tags.get(EVERY_DAYS_TAG, "")
    return int(text) if text.isdigit() and int(text) > 0 else None


def due_from_versions(
    versions: list[Any], champion: int | None, now: datetime
) -> DueCheck:
    """Decide from registered versions (objects with ``version`` and ``tags``).

    ``champion`` is the champion's version number, if any. Versions without the
    tags (trained before cadences were recorded) are ignored; with none left, a
    retraining is due.
    """
    dated: list[tuple[Any, datetime]] = []
    for version in versions:
        until = _parse_until(dict(version.tags or {}))
        if until is not None:
            dated.append((version, until))
    if not dated:
        return DueCheck(True, "no registered version records its training data's end")
    trained_until = max(until for _, until in dated)
    champions = [v for v, _ in dated if int(v.version) == champion]
    source = (
        champions[0] if champions else max(dated, key=lambda p: int(p[0].version))[0]
    )
    every = _parse_days(dict(source.tags or {}))
    if every is None:
        return DueCheck(
            True,
            f"version {source.version} records no cadence",
            trained_until=trained_until,
        )
    due_at = trained_until + timedelta(days=every)
    role = "champion" if champions else "newest"
    if now >= due_at:
        reason = (
            f"due: the newest training data ends {trained_until:%Y-%m-%d}, the "
            f"{role} version {source.version} chose a {every}-day cadence"
        )
        return DueCheck(True, reason, every, trained_until)
    reason = (
        f"not due until {due_at:%Y-%m-%d}: the newest training data ends "
        f"{trained_until:%Y-%m-%d} and the {role} version {source.version} chose a "
        f"{every}-day cadence from its own past"
    )
    return DueCheck(False, reason, every, trained_until)


def registered_versions(settings: Settings) -> list[Any]:
    """Return every registered version of the model (MLflow objects with ``version``
    and ``tags``); none when the model was never registered."""
    from model_registry.tracking import disable_mlflow_telemetry, mlflow_client

    disable_mlflow_telemetry()  # before the first import of MLflow
    from mlflow.exceptions import MlflowException

    try:
        found = mlflow_client(settings).search_model_versions(
            f"name='{settings.model_name}'"
        )
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return []
        raise
    return list(found)


def check_due(settings: Settings, now: datetime) -> DueCheck:
    """Return whether the registry's versions say a retraining is due at ``now``."""
    from model_registry.registry import champion_version

    versions = registered_versions(settings)
    if not versions:
        return DueCheck(True, "no model registered yet")
    champion = champion_version(settings)
    number = champion.version if champion is not None else None
    return due_from_versions(versions, number, now)
