"""The prediction the JEDI refiner adds on top of the refiner it wraps.

:mod:`panda_predictor.plugins.jedi_refiner` (what JEDI loads) imports this module
only when a task is refined, inside its fail-open boundary: whatever fails here,
JEDI's refiner runs as configured.

:func:`predict_into_map` predicts the task from its parameter map (in-process
champion or the HTTP service, see :mod:`panda_predictor.plugins.prediction_client`
and :mod:`panda_predictor.plugins.http_client`, chosen by
:func:`client_from_environment`)
and, when the decision is ``applied``, puts ``ramCount``/``ramUnit``,
``cpuTime``/``cpuTimeUnit``, ``ioIntensity``/``ioIntensityUnit`` and ``skipScout``
into the map, so the wrapped refiner builds the task spec from them (no ``US=``
split rule, resource type and work queue from the predicted values). The
requester's own values are treated as PanDA's scouts treat them
(:mod:`panda_predictor.core.domain.requested_values`, the same rule as the database
hook): a ``...Fixed`` unit is never overwritten, a larger walltime stays, other preset
values are replaced, and a prediction far from them keeps the scouts. The values go
in the form the hook writes into JEDI_TASKS
(:func:`~panda_predictor.core.domain.units.database_value`: cputime in whole
``HS06sPerEvent``, never milli or Fixed): the refiner takes them out of the map
again, so they live only in JEDI_TASKS, and PanDA's re-measurement reads the
previous cpuTimeUnit from the task parameters; a later measurement of 10 or more
left under our ``mHS06sPerEvent`` would be read 1000x too small.

It fails open: on ``kept_scouts``, the kill switch, or any error the map is left
exactly as it came, the reason is logged with ``jediTaskID=`` and counted in
``panda_predictor_fallbacks_total{hook="jedi"}``.

Every decision is audited like the hook's, in ``pp_prediction_audit`` of the
database in the settings (``db_url``): ``applied`` (values put into the map),
``kept_scouts`` (also under the kill switch), ``shadow`` (``mode: shadow``: predicted,
nothing put into the map), ``held_back`` (outside ``rollout_share``, scouts run) or
``error`` (the prediction failed), so feedback and drift see the tasks this path
predicted, and the database hook never predicts them a second time. A task whose
definition already skips scouts is not predicted and not audited. An audit that
cannot be written is logged with ``jediTaskID=`` and counted
(``reason="audit_failed"``); it never stops JEDI. The audit rows and the in-process
client's history reads share one engine (one connection pool) per JEDI process.

Without a database it predicts nothing: with no ``db_url`` and a relative ``home``
(the default ``var``), the settings' database would be a SQLite file under JEDI's
working directory, where the audit rows would hide from the database hook (which
would predict the task a second time) and no history would ever be read. Every task
then fails open unaudited (``reason="no_database"``), and one error per process names
the setting to fix. An absolute ``home`` is the embedded SQLite chosen on purpose.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from panda_predictor.core.decide.rollout import route
from panda_predictor.core.domain.requested_values import (
    WritePlan,
    plan_write,
    preset_note,
    requested_values,
)
from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.core.domain.units import database_value
from panda_predictor.db.audit_writer import (
    TaskFailure,
    write_audit,
    write_error_audits,
)
from panda_predictor.db.engine import URL_ENV, make_engine
from panda_predictor.hook.submit import LEGACY_REASON, kill_switch_on
from panda_predictor.metrics import (
    FALLBACKS,
    KILL_SWITCH_TASKS,
    TASKS,
    record_kill_switch,
)
from panda_predictor.plugins.http_client import HttpClient
from panda_predictor.plugins.prediction_client import (
    HOOK,
    PARAM_MAP_KEYS,
    REQUESTED_KEYS,
    InProcessClient,
    PredictionClient,
    PredictionUnavailable,
    definition_from_param_map,
)
from panda_predictor.settings import ENV_PREFIX, Settings, load_settings

# One logger for all the refiner plugin logs (docs/jedi-plugin.md names it).
log = logging.getLogger("panda_predictor.plugins.jedi_refiner")

_shared_lock = threading.Lock()
_shared: dict[str, Any] = {}

#: Fallback reasons with no audit row: the kill switch audits its own
#: ``kept_scouts``; without a database there is nowhere to write one.
_NOT_AUDITED = frozenset({"legacy", "no_database"})


def _shared_settings_and_client() -> tuple[Settings, PredictionClient]:
    # JEDI builds refiners with (taskBufferIF, ddmIF) only, possibly many times: the
    # settings and the client (with its loaded model) are built once per process.
    # The in-process client reads the history through the audit engine.
    with _shared_lock:
        if "client" not in _shared:
            settings = load_settings()
            _shared["client"] = client_from_environment(
                settings, engine_provider=functools.partial(_shared_engine, settings)
            )
            _shared["settings"] = settings
        return _shared["settings"], _shared["client"]


def client_from_environment(
    settings: Settings, engine_provider: Callable[[], Any] | None = None
) -> PredictionClient:
    """Return the HTTP client when the ``refiner_url`` setting is set, else local.

    The settings come from the environment (``PANDA_PREDICTOR_REFINER_URL``,
    ``..._TIMEOUT``, ``..._RELOAD_SECONDS``, ``..._HISTORY_REFRESH_SECONDS``) or the
    config file, checked there: ``refiner_timeout`` (seconds) bounds an HTTP call;
    ``refiner_reload_seconds`` is how often the in-process client looks for a new
    champion, ``refiner_history_refresh_seconds`` how often it reads the recent
    history (0: never), through ``engine_provider``'s engine when given (see
    :class:`InProcessClient`).
    """
    url = (settings.refiner_url or "").strip()
    if url:
        return HttpClient(url, settings.refiner_timeout)
    return InProcessClient(
        settings,
        reload_seconds=settings.refiner_reload_seconds,
        history_refresh_seconds=settings.refiner_history_refresh_seconds,
        engine_provider=engine_provider,
    )


def reset_shared_client() -> None:
    """Forget the process-wide settings and client (tests, or after a config change).

    The in-process client's history refresher stops first, then each shared
    engine is disposed of once; a missing database is logged again.
    """
    with _shared_lock:
        client = _shared.pop("client", None)
    close = getattr(client, "close", None)
    if close is not None:
        close()  # waits for a history read under way: its engine is free after
    with _shared_lock:
        engines = _shared.get("engines", {})
        _shared.clear()
    for engine in engines.values():
        engine.dispose()


def _shared_engine(settings: Settings) -> Any:
    """Return the process's engine on the settings' database, built on first use.

    One engine (and connection pool) per process and database: the audit rows and
    the in-process client's history reads go through it. In a forked child it
    first drops the parent's pooled connections (they stay open for the parent),
    so the child opens its own.
    """
    url = settings.database_url()
    with _shared_lock:
        engines: dict[str, Any] = _shared.setdefault("engines", {})
        if _shared.setdefault("engines_pid", os.getpid()) != os.getpid():
            for engine in engines.values():
                engine.dispose(close=False)
            _shared["engines_pid"] = os.getpid()
        if url not in engines:
            engines[url] = make_engine(settings)
        return engines[url]


@dataclasses.dataclass(frozen=True)
class Applied:
    """What :func:`predict_into_map` put into a task parameter map.

    ``values`` are the keys and values put in, ``before`` the requester's values of
    those keys the map already had, ``walltime`` the (value, unit) to set on the
    task spec after the wrapped refiner (None: none to set).
    """

    values: dict[str, Any]
    before: dict[str, Any]
    walltime: tuple[int, str] | None


def predict_into_map(
    jedi_task_id: int,
    task_param_map: MutableMapping[str, Any],
    client: PredictionClient | None = None,
    settings: Settings | None = None,
    audit_bind: Any = None,
) -> Applied | None:
    """Fill the map from a confident prediction; return what was put in.

    Never raises: any failure restores the map and returns None (scouts run).

    Parameters
    ----------
    jedi_task_id, task_param_map:
        JEDI's task id and the task parameter map the wrapped refiner will read.
    client:
        Prediction client; default: built once per process from the environment
        (``PANDA_PREDICTOR_REFINER_URL`` for HTTP mode, else in-process).
    settings:
        panda-predictor settings (kill switch, fixed units); default: loaded from
        the environment and ``PANDA_PREDICTOR_CONFIG`` once per process.
    audit_bind:
        Engine or connection of the database holding ``pp_prediction_audit``;
        default: the process's engine on ``settings.db_url``, which the default
        in-process client reads the history through too.
    """
    original = copy.deepcopy(dict(task_param_map))
    used: Settings | None = None
    try:
        if "skipScout" in task_param_map:
            log.info("jediTaskID=%s already skips scouts: not predicted", jedi_task_id)
            return None
        used, client = _configuration(client, settings)
        _require_database(used)
        _stop_if_legacy(used, audit_bind, jedi_task_id)
        prediction = client.predict(
            definition_from_param_map(jedi_task_id, task_param_map)
        )
        requested = requested_values(task_param_map, REQUESTED_KEYS)
        plan = plan_write(
            prediction,
            requested,
            used.fixed_units,
            used.never_below_preset,
            convert=database_value,
        )
        prediction = _decision(prediction, plan, jedi_task_id, used)
        if prediction.decision != "applied":
            _keep_scouts(used, audit_bind, jedi_task_id, prediction)
            return None
        walltime = fill(task_param_map, plan)
    except Exception as exc:  # noqa: BLE001  the fail-open boundary
        _fail_open(exc, jedi_task_id, task_param_map, original, used, audit_bind)
        return None
    _audit(used, audit_bind, jedi_task_id, prediction, True)
    TASKS.labels(HOOK, "applied").inc()
    applied = _changes(original, task_param_map, walltime)
    log.info(
        "jediTaskID=%s decision=applied reason=%s model=%s/%s values=%s",
        jedi_task_id,
        prediction.reason,
        prediction.model_name,
        prediction.model_version,
        applied.values,
    )
    return applied


def _require_database(settings: Settings) -> None:
    """Fail the task open when the settings name no database JEDI's operator chose.

    No ``db_url`` and a relative ``home`` is the default, not a choice: the SQLite
    file it names would sit under JEDI's working directory. The first such task of
    the process logs the error naming the settings; each one raises
    ``no_database``.
    """
    if settings.db_url or settings.home.is_absolute():
        return
    with _shared_lock:
        first = not _shared.get("no_database_logged")
        _shared["no_database_logged"] = True
    if first:
        log.error(
            "db_url is not set: the JEDI refiner audits its decisions in PanDA's "
            "database (pp_prediction_audit, which keeps the database hook from "
            "predicting a task a second time) and reads the recent history from it. "
            "Set %s to PanDA's database, or %sHOME to an absolute folder for the "
            "embedded SQLite. Got no db_url and the relative home %r instead: no "
            "task is predicted (reason=no_database), the scouts run.",
            URL_ENV,
            ENV_PREFIX,
            str(settings.home),
        )
    raise PredictionUnavailable(
        f"db_url is not set and home {str(settings.home)!r} is relative",
        "no_database",
    )


def _stop_if_legacy(settings: Settings, audit_bind: Any, jedi_task_id: int) -> None:
    """Audit the task ``kept_scouts`` and fail open when the kill switch is on."""
    legacy = kill_switch_on(settings)
    record_kill_switch(HOOK, legacy)
    if legacy:
        KILL_SWITCH_TASKS.labels(HOOK).inc()
        _audit(settings, audit_bind, jedi_task_id, _legacy(jedi_task_id), False)
        raise PredictionUnavailable("kill switch on (legacy mode)", "legacy")


def _decision(
    prediction: TaskPrediction, plan: WritePlan, jedi_task_id: int, settings: Settings
) -> TaskPrediction:
    """Return the prediction as decided for this task: presets, then the rollout.

    A task PanDA would exhaust keeps its scouts; a kept preset is noted in the
    reason; shadow mode and the rollout share (placed by JEDI's own task id) may
    hold the task back.
    """
    if plan.far is not None:
        # PanDA would exhaust such a task: it keeps its scouts, audited so.
        prediction = dataclasses.replace(
            prediction, decision="kept_scouts", reason=plan.far
        )
    elif (note := preset_note(plan)) is not None:
        # Cut to the audit column (400) rather than fail the task open.
        prediction = dataclasses.replace(
            prediction, reason=f"{prediction.reason}; {note}"[:400]
        )
    # Shadow mode and the rollout share (placed by JEDI's own task id):
    # audited, the map left as it came.
    return route(
        dataclasses.replace(prediction, jeditaskid=int(jedi_task_id)),
        settings.mode,
        settings.rollout_share,
    )


def _keep_scouts(
    settings: Settings, audit_bind: Any, jedi_task_id: int, prediction: TaskPrediction
) -> None:
    """Audit, count and log a task whose map is left as it came (scouts run)."""
    _audit(settings, audit_bind, jedi_task_id, prediction, False)
    TASKS.labels(HOOK, prediction.decision).inc()
    log.info(
        "jediTaskID=%s decision=%s reason=%s model=%s/%s",
        jedi_task_id,
        prediction.decision,
        prediction.reason,
        prediction.model_name,
        prediction.model_version,
    )


def _fail_open(
    exc: Exception,
    jedi_task_id: int,
    task_param_map: MutableMapping[str, Any],
    original: dict[str, Any],
    settings: Settings | None,
    audit_bind: Any,
) -> None:
    """Restore the map as it came, audit the failure, count and log it."""
    reason = (
        exc.reason if isinstance(exc, PredictionUnavailable) else (type(exc).__name__)
    )
    if task_param_map != original:
        task_param_map.clear()
        task_param_map.update(original)
    if settings is not None and reason not in _NOT_AUDITED:
        _audit(
            settings,
            audit_bind,
            jedi_task_id,
            None,
            False,
            f"prediction failed: {type(exc).__name__}: {exc}",
        )
    FALLBACKS.labels(HOOK, reason).inc()
    log.warning(
        "jediTaskID=%s prediction failed open, scouts run (reason=%s): %s",
        jedi_task_id,
        reason,
        exc,
    )


def _configuration(
    client: PredictionClient | None, settings: Settings | None
) -> tuple[Settings, PredictionClient]:
    if client is not None and settings is not None:
        return settings, client
    shared_settings, shared_client = _shared_settings_and_client()
    return settings or shared_settings, client or shared_client


def _changes(
    original: Mapping[str, Any],
    task_param_map: Mapping[str, Any],
    walltime: tuple[int, str] | None,
) -> Applied:
    values = {
        key: value
        for key, value in sorted(task_param_map.items())
        if key not in original or original[key] != value
    }
    before = {key: original[key] for key in values if key in original}
    return Applied(values, before, walltime)


def _audit(
    settings: Settings,
    audit_bind: Any,
    jedi_task_id: int,
    prediction: TaskPrediction | None,
    written: bool,
    failure: str = "",
) -> None:
    """Record the decision in pp_prediction_audit as the hook does; never raises."""
    try:
        bind = audit_bind or _shared_engine(settings)
        if prediction is None:
            write_error_audits(
                bind, settings, [TaskFailure(int(jedi_task_id), failure)]
            )
        else:
            prediction = dataclasses.replace(prediction, jeditaskid=int(jedi_task_id))
            write_audit(
                bind,
                settings,
                prediction,
                written,
                settings.fixed_units,
                convert=database_value,
            )
    except Exception as exc:  # noqa: BLE001  auditing never stops JEDI
        FALLBACKS.labels(HOOK, "audit_failed").inc()
        log.warning("jediTaskID=%s decision not audited: %s", jedi_task_id, exc)


def fill(
    task_param_map: MutableMapping[str, Any], plan: WritePlan
) -> tuple[int, str] | None:
    """Put the planned values into the map; return the walltime to set after.

    The plan already kept the requester's values PanDA's scouts keep (``...Fixed``
    units, a larger walltime), the same rule the database hook's writer follows.
    """
    for target, (value_key, unit_key) in PARAM_MAP_KEYS.items():
        if target in plan.values:
            task_param_map[value_key], task_param_map[unit_key] = plan.values[target]
    task_param_map["skipScout"] = True
    return plan.values.get("walltime")


def _legacy(jedi_task_id: int) -> TaskPrediction:
    return TaskPrediction(
        int(jedi_task_id), "legacy", "-", "kept_scouts", LEGACY_REASON, {}
    )


__all__ = [
    "HOOK",
    "Applied",
    "client_from_environment",
    "fill",
    "predict_into_map",
    "reset_shared_client",
]
