"""A person overrules the gate: list and inspect versions, promote, roll back.

The gate (:mod:`model_registry.promotion`) moves the ``champion`` alias on its own; an
operator needs to see what it decided and to move the alias by hand, with a reason
on record. Every move here writes who, when and why as tags of the version that
became champion (``manual.*``), and the version it replaced as
``champion.previous``, so a rollback knows where to go even after several moves.
The ``previous`` alias always names the champion before the current one.
"""

from __future__ import annotations

import getpass
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from model_registry.registry import (
    CHAMPION,
    PREVIOUS,
    PREVIOUS_CHAMPION_TAG,
    ModelVersionInfo,
    _reader_client,
    _to_info,
    champion_version,
    set_alias,
    version_by_alias,
    version_metrics,
)
from model_registry.tracking import mlflow_client
from panda_predictor.errors import UserInputError

if TYPE_CHECKING:
    from panda_predictor.settings import Settings

logger = logging.getLogger(__name__)

MANUAL_PREFIX = "manual."
#: Metrics ``model list`` shows, in order (as logged by training).
KEY_METRICS = ("served.mean_accuracy", "mean_accuracy", "ramcount.under_allocation")
_MAX_TAG = 5000


class ManualModelError(UserInputError):
    """An operator's request on the registry cannot be done as asked."""


@dataclass(frozen=True)
class VersionRow:
    """One line of ``model list``."""

    version: int
    aliases: tuple[str, ...]
    created: datetime | None
    metrics: dict[str, float]
    verdict: str


def _verdict(info: ModelVersionInfo) -> str:
    """Return how the version got its place: the gate's decision or a person's."""
    tags = info.tags
    rolled_at = tags.get(MANUAL_PREFIX + "rolled_back_at", "")
    if rolled_at and rolled_at > tags.get(MANUAL_PREFIX + "at", ""):
        return (
            f"rolled back by {tags.get(MANUAL_PREFIX + 'rolled_back_by', '?')}: "
            f"{tags.get(MANUAL_PREFIX + 'rolled_back_reason', '')}"
        )
    if MANUAL_PREFIX + "action" in tags:
        return (
            f"{tags[MANUAL_PREFIX + 'action']} by {tags.get(MANUAL_PREFIX + 'by', '?')}"
            f": {tags.get(MANUAL_PREFIX + 'reason', '')}"
        )
    if "gate.decision" in tags:
        return f"gate: {tags['gate.decision']} ({tags.get('gate.reason', '')})"
    return "not gated"


def all_versions(settings: Settings) -> list[ModelVersionInfo]:
    """Return every version of the model, newest first (empty if none)."""
    client = _reader_client(settings)
    found = client.search_model_versions(f"name = '{settings.model_name}'")
    # search_model_versions leaves aliases out on some stores: read each version.
    infos = [_to_info(client.get_model_version(mv.name, mv.version)) for mv in found]
    return sorted(infos, key=lambda i: i.version, reverse=True)


def list_versions(settings: Settings) -> list[VersionRow]:
    """Return one row per version: aliases, creation time, key metrics, verdict."""
    rows = []
    for info in all_versions(settings):
        metrics = version_metrics(settings, info)
        rows.append(
            VersionRow(
                info.version,
                info.aliases,
                info.created,
                {k: metrics[k] for k in KEY_METRICS if k in metrics},
                _verdict(info),
            )
        )
    return rows


@dataclass(frozen=True)
class VersionDetails:
    """What ``model show`` prints about one version."""

    info: ModelVersionInfo
    params: dict[str, str]
    metrics: dict[str, float]
    run_tags: dict[str, str]
    lineage: dict[str, str]


def show_version(settings: Settings, version: int) -> VersionDetails:
    """Return params, metrics, tags and lineage (run, data, commit) of ``version``."""
    info = get_existing(settings, version)
    params: dict[str, str] = {}
    run_tags: dict[str, str] = {}
    lineage = {"source": info.source}
    if info.run_id is not None:
        run = _reader_client(settings).get_run(info.run_id)
        params = dict(run.data.params)
        run_tags = {
            k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.log")
        }
        lineage["run"] = f"{info.run_id} ({run.info.run_name}, {run.info.status})"
        commit = run.data.tags.get("mlflow.source.git.commit")
        if commit:
            lineage["git commit"] = commit
        for n, item in enumerate(run.inputs.dataset_inputs if run.inputs else ()):
            lineage[f"dataset {n + 1}"] = (
                f"{item.dataset.name} (digest {item.dataset.digest})"
            )
    previous = info.tags.get(PREVIOUS_CHAMPION_TAG)
    if previous:
        lineage["replaced champion"] = f"version {previous}"
    return VersionDetails(
        info, params, version_metrics(settings, info), run_tags, lineage
    )


def get_existing(settings: Settings, version: int) -> ModelVersionInfo:
    """Return ``version``, or raise :class:`ManualModelError` listing the known ones."""
    versions = {i.version: i for i in all_versions(settings)}
    if version not in versions:
        listed = ", ".join(str(v) for v in sorted(versions)) or "none"
        raise ManualModelError(
            f"The version must be a registered version of {settings.model_name!r} "
            f"({listed}). Got {version} instead."
        )
    return versions[version]


def _checked_reason(reason: str | None) -> str:
    text = (reason or "").strip()
    if not text:
        raise ManualModelError(
            "The --reason must say why the champion changes (it is recorded on the "
            f"version). Got {reason!r} instead."
        )
    return text


def operator(settings: Settings) -> str:
    """Return who is acting: the login name (the ``operator`` setting wins)."""
    named = (settings.operator or "").strip()
    if named:
        return named
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


@dataclass(frozen=True)
class AliasMove:
    """What a promote or rollback did."""

    action: str
    champion: int
    replaced: int | None
    previous: int | None
    by: str
    at: datetime
    reason: str

    def describe(self) -> str:
        """Return one line for the CLI."""
        was = f"version {self.replaced}" if self.replaced is not None else "none"
        prev = f"version {self.previous}" if self.previous is not None else "none"
        return (
            f"{self.action}: champion is now version {self.champion} (was {was}; "
            f"previous: {prev}) by {self.by} at {self.at:%Y-%m-%d %H:%M:%S} UTC: "
            f"{self.reason}"
        )


def _write_tags(settings: Settings, version: int, tags: dict[str, str]) -> None:
    client = mlflow_client(settings)
    for key, value in tags.items():
        client.set_model_version_tag(
            settings.model_name, str(version), key, value[:_MAX_TAG]
        )


def promote(
    settings: Settings, version: int, reason: str, by: str | None = None
) -> AliasMove:
    """Make ``version`` champion by hand; the old champion becomes ``previous``.

    Parameters
    ----------
    settings:
        Settings naming the store and ``model_name``.
    version:
        A registered version that is not champion already.
    reason:
        Why (recorded as the tag ``manual.reason``); must not be blank.
    by:
        Who (default: :func:`operator`).
    """
    text = _checked_reason(reason)
    info = get_existing(settings, version)
    current = champion_version(settings)
    if current is not None and current.version == version:
        raise ManualModelError(
            f"The version to promote must not be champion already. Got version "
            f"{version}, which is {settings.model_name!r}@champion."
        )
    move = AliasMove(
        "promote",
        info.version,
        current.version if current else None,
        current.version if current else None,
        by or operator(settings),
        datetime.now(UTC),
        text,
    )
    _record(settings, move)
    if current is not None:
        set_alias(settings, current.version, PREVIOUS)
    set_alias(settings, version, CHAMPION)
    logger.info("Model %s %s", settings.model_name, move.describe())
    return move


def rollback(settings: Settings, reason: str, by: str | None = None) -> AliasMove:
    """Make the ``previous`` champion champion again.

    ``previous`` then moves one step further back (to the champion that the restored
    version itself replaced), so repeated rollbacks walk back through history; it
    is removed when that is unknown.
    """
    text = _checked_reason(reason)
    target = version_by_alias(settings, PREVIOUS)
    if target is None:
        raise ManualModelError(
            f"A rollback needs a previous champion of {settings.model_name!r} (the "
            "'previous' alias, set when a champion is replaced). Got none instead: "
            "promote a version by number with 'panda-predictor model promote'."
        )
    current = champion_version(settings)
    further = _previous_of(settings, target)
    move = AliasMove(
        "rollback",
        target.version,
        current.version if current else None,
        further,
        by or operator(settings),
        datetime.now(UTC),
        text,
    )
    _record(settings, move)
    if current is not None:
        _write_tags(
            settings,
            current.version,
            {
                f"{MANUAL_PREFIX}rolled_back_by": move.by,
                f"{MANUAL_PREFIX}rolled_back_at": move.at.isoformat(),
                f"{MANUAL_PREFIX}rolled_back_reason": text,
            },
        )
    set_alias(settings, target.version, CHAMPION)
    client = mlflow_client(settings)
    if further is not None:
        set_alias(settings, further, PREVIOUS)
    else:
        client.delete_registered_model_alias(settings.model_name, PREVIOUS)
    logger.info("Model %s %s", settings.model_name, move.describe())
    return move


def _previous_of(settings: Settings, info: ModelVersionInfo) -> int | None:
    """Return the champion ``info`` replaced, if recorded and still registered."""
    text = info.tags.get(PREVIOUS_CHAMPION_TAG, "")
    if not text.isdigit() or int(text) == info.version:
        return None
    known = {i.version for i in all_versions(settings)}
    return int(text) if int(text) in known else None


def _record(settings: Settings, move: AliasMove) -> None:
    """Write who, when and why on the version that becomes champion."""
    tags = {
        f"{MANUAL_PREFIX}action": move.action,
        f"{MANUAL_PREFIX}by": move.by,
        f"{MANUAL_PREFIX}at": move.at.isoformat(),
        f"{MANUAL_PREFIX}reason": move.reason,
    }
    if move.action == "promote" and move.replaced is not None:
        tags[PREVIOUS_CHAMPION_TAG] = str(move.replaced)
    _write_tags(settings, move.champion, tags)
