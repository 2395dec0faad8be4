"""A JEDI TaskRefiner that predicts a task's resources so it can skip its scouts.

JEDI loads it from its configuration (``panda_jedi.cfg``, section ``[taskrefine]``)::

    modConfig = atlas:managed:panda_predictor.plugins.jedi_refiner:PredictingTaskRefiner

:meth:`PredictingTaskRefiner.extractCommon` runs when JEDI turns a task parameter map
into the ``JEDI_TASKS`` row. Before calling PanDA's own ``GenTaskRefiner`` it predicts
the task from the map (in-process champion or the HTTP service, see
:mod:`panda_predictor.plugins.prediction_client`); when the decision is ``applied`` it
puts ``ramCount``/``ramUnit``, ``cpuTime``/``cpuTimeUnit``,
``ioIntensity``/``ioIntensityUnit`` and ``skipScout`` into the map (so the parent
writes no ``US=`` split rule), and after the parent it sets the task spec's
``walltime``/``walltimeUnit``. The requester's own values are treated as PanDA's
scouts treat them (:mod:`panda_predictor.core.requested_values`, the same rule as
the database hook): a ``...Fixed`` unit is never overwritten, a larger walltime
stays, other preset values are replaced, and a prediction far from them keeps the
scouts.

It fails open: on ``kept_scouts``, the kill switch, or any error of ours the map is
left exactly as it came, the reason is logged with ``jediTaskID=`` and counted in
``panda_predictor_fallbacks_total{hook="jedi"}``, and the parent refines the task as
if the plugin were not there. The parent's own exceptions propagate unchanged.

Every decision is audited like the hook's, in ``pp_prediction_audit`` of the
database in the settings (``db_url``): ``applied`` (values put into the map),
``kept_scouts`` (also under the kill switch), ``shadow`` (``mode: shadow``: predicted,
nothing put into the map), ``held_back`` (outside ``rollout_share``, scouts run) or
``error`` (the prediction failed), so
feedback and drift see the tasks this path predicted, and the database hook never
predicts them a second time. A task whose definition already skips scouts is not
predicted and not audited. An audit that cannot be written is logged with
``jediTaskID=`` and counted (``reason="audit_failed"``); it never stops JEDI.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
from collections.abc import MutableMapping
from typing import Any

from pandajedi.jedirefine.GenTaskRefiner import GenTaskRefiner

from panda_predictor.core.requested_values import (
    WritePlan,
    plan_write,
    preset_note,
    requested_values,
)
from panda_predictor.core.rollout import route
from panda_predictor.core.task_prediction import TaskPrediction
from panda_predictor.db.engine import make_engine
from panda_predictor.db.writer import TaskFailure, write_audit, write_error_audits
from panda_predictor.hook import LEGACY_REASON, kill_switch_on
from panda_predictor.metrics import (
    FALLBACKS,
    KILL_SWITCH_TASKS,
    TASKS,
    record_kill_switch,
)
from panda_predictor.plugins.prediction_client import (
    PARAM_MAP_KEYS,
    REQUESTED_KEYS,
    PredictionClient,
    PredictionUnavailable,
    client_from_environment,
    definition_from_param_map,
)
from panda_predictor.settings import Settings, load_settings

log = logging.getLogger(__name__)

#: Label of this hook in the panda_predictor_* metrics.
HOOK = "jedi"

_shared_lock = threading.Lock()
_shared: dict[str, Any] = {}


def _shared_settings_and_client() -> tuple[Settings, PredictionClient]:
    # JEDI builds refiners with (taskBufferIF, ddmIF) only, possibly many times: the
    # settings and the client (with its loaded model) are built once per process.
    with _shared_lock:
        if "client" not in _shared:
            settings = load_settings()
            _shared["client"] = client_from_environment(settings)
            _shared["settings"] = settings
        return _shared["settings"], _shared["client"]


def reset_shared_client() -> None:
    """Forget the process-wide settings and client (tests, or after a config change)."""
    with _shared_lock:
        engine = _shared.get("audit_engine")
        _shared.clear()
    if engine is not None:
        engine.dispose()


def _shared_audit_engine(settings: Settings) -> Any:
    # One engine (and connection pool) per process for the audit rows.
    with _shared_lock:
        if _shared.get("audit_url") != settings.db_url:
            _shared["audit_engine"] = make_engine(settings)
            _shared["audit_url"] = settings.db_url
        return _shared["audit_engine"]


class PredictingTaskRefiner(GenTaskRefiner):
    """GenTaskRefiner that sets predicted resources and skips scouts when confident.

    Parameters
    ----------
    taskBufferIF, ddmIF:
        JEDI's task buffer and DDM interfaces, passed through to the parent.
    client:
        Prediction client; default: built once per process from the environment
        (``PANDA_PREDICTOR_REFINER_URL`` for HTTP mode, else in-process).
    settings:
        panda-predictor settings (kill switch, fixed units); default: loaded from
        the environment and ``PANDA_PREDICTOR_CONFIG`` once per process.
    audit_bind:
        Engine or connection of the database holding ``pp_prediction_audit``;
        default: one engine per process from ``settings.db_url``.
    """

    def __init__(
        self,
        taskBufferIF: Any,
        ddmIF: Any,
        client: PredictionClient | None = None,
        settings: Settings | None = None,
        audit_bind: Any = None,
    ) -> None:
        GenTaskRefiner.__init__(self, taskBufferIF, ddmIF)
        self._client = client
        self._settings = settings
        self._audit_bind = audit_bind

    def _configuration(self) -> tuple[Settings, PredictionClient]:
        if self._client is not None and self._settings is not None:
            return self._settings, self._client
        settings, client = _shared_settings_and_client()
        return self._settings or settings, self._client or client

    def extractCommon(
        self,
        jediTaskID: int,
        taskParamMap: MutableMapping[str, Any],
        workQueueMapper: Any,
        splitRule: str | None,
    ) -> None:
        """Predict, fill the map when confident, then refine as GenTaskRefiner does."""
        walltime = self._apply_prediction(jediTaskID, taskParamMap)
        GenTaskRefiner.extractCommon(
            self, jediTaskID, taskParamMap, workQueueMapper, splitRule
        )
        if walltime is not None:
            self.taskSpec.walltime, self.taskSpec.walltimeUnit = walltime

    def _apply_prediction(
        self, jedi_task_id: int, task_param_map: MutableMapping[str, Any]
    ) -> tuple[int, str] | None:
        """Fill the map from a confident prediction; return the walltime to set.

        Never raises: any failure restores the map and returns None (scouts run).
        """
        original = copy.deepcopy(dict(task_param_map))
        settings: Settings | None = None
        try:
            if "skipScout" in task_param_map:
                log.info(
                    "jediTaskID=%s already skips scouts: not predicted", jedi_task_id
                )
                return None
            settings, client = self._configuration()
            legacy = kill_switch_on(settings)
            record_kill_switch(HOOK, legacy)
            if legacy:
                KILL_SWITCH_TASKS.labels(HOOK).inc()
                self._audit(settings, jedi_task_id, _legacy(jedi_task_id), False)
                raise PredictionUnavailable("kill switch on (legacy mode)", "legacy")
            prediction = client.predict(
                definition_from_param_map(jedi_task_id, task_param_map)
            )
            requested = requested_values(task_param_map, REQUESTED_KEYS)
            plan = plan_write(
                prediction,
                requested,
                settings.fixed_units,
                settings.never_below_preset,
            )
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
            prediction = route(
                dataclasses.replace(prediction, jeditaskid=int(jedi_task_id)),
                settings.mode,
                settings.rollout_share,
            )
            if prediction.decision != "applied":
                self._audit(settings, jedi_task_id, prediction, False)
                TASKS.labels(HOOK, prediction.decision).inc()
                log.info(
                    "jediTaskID=%s decision=%s reason=%s model=%s/%s",
                    jedi_task_id,
                    prediction.decision,
                    prediction.reason,
                    prediction.model_name,
                    prediction.model_version,
                )
                return None
            walltime = self._fill(task_param_map, plan)
        except Exception as exc:  # noqa: BLE001  the fail-open boundary
            reason = (
                exc.reason
                if isinstance(exc, PredictionUnavailable)
                else (type(exc).__name__)
            )
            if task_param_map != original:
                task_param_map.clear()
                task_param_map.update(original)
            if settings is not None and reason != "legacy":
                self._audit(
                    settings,
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
            return None
        self._audit(settings, jedi_task_id, prediction, True)
        TASKS.labels(HOOK, "applied").inc()
        log.info(
            "jediTaskID=%s decision=applied reason=%s model=%s/%s values=%s",
            jedi_task_id,
            prediction.reason,
            prediction.model_name,
            prediction.model_version,
            {k: task_param_map[k] for k in sorted(task_param_map) if k not in original},
        )
        return walltime

    def _audit(
        self,
        settings: Settings,
        jedi_task_id: int,
        prediction: TaskPrediction | None,
        written: bool,
        failure: str = "",
    ) -> None:
        """Record the decision in pp_prediction_audit as the hook does; never raises."""
        try:
            bind = self._audit_bind or _shared_audit_engine(settings)
            if prediction is None:
                write_error_audits(
                    bind, settings, [TaskFailure(int(jedi_task_id), failure)]
                )
            else:
                prediction = dataclasses.replace(
                    prediction, jeditaskid=int(jedi_task_id)
                )
                write_audit(bind, settings, prediction, written, settings.fixed_units)
        except Exception as exc:  # noqa: BLE001  auditing never stops JEDI
            FALLBACKS.labels(HOOK, "audit_failed").inc()
            log.warning("jediTaskID=%s decision not audited: %s", jedi_task_id, exc)

    @staticmethod
    def _fill(
        task_param_map: MutableMapping[str, Any], plan: WritePlan
    ) -> tuple[int, str] | None:
        """Put the planned values into the map; return the walltime to set after.

        The plan already kept the requester's values PanDA's scouts keep (``...Fixed``
        units, a larger walltime), the same rule the database hook's writer follows.
        """
        for target, (value_key, unit_key) in PARAM_MAP_KEYS.items():
            if target in plan.values:
                task_param_map[value_key], task_param_map[unit_key] = plan.values[
                    target
                ]
        task_param_map["skipScout"] = True
        return plan.values.get("walltime")


def _legacy(jedi_task_id: int) -> TaskPrediction:
    return TaskPrediction(
        int(jedi_task_id), "legacy", "-", "kept_scouts", LEGACY_REASON, {}
    )


__all__ = ["HOOK", "PredictingTaskRefiner", "reset_shared_client"]
