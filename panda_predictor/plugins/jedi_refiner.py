"""JEDI TaskRefiners: the refiner a VO/label is configured with, plus a prediction.

JEDI picks a refiner per VO and source label from ``panda_jedi.cfg``, section
``[taskrefine]``, ``modConfig = vo:label:module.path:Attribute[:taskType],...``. Each
name below is one of PanDA's refiners with the prediction on top; put it where the
VO/label names that refiner now (one line, no spaces; split here to fit)::

    modConfig = atlas:managed:panda_predictor.plugins.jedi_refiner:\
    PredictingAtlasProdTaskRefiner,atlas:user:panda_predictor.plugins.jedi_refiner:\
    PredictingAtlasAnalTaskRefiner

- ``PredictingAtlasProdTaskRefiner`` wraps
  ``pandajedi.jedirefine.AtlasProdTaskRefiner:AtlasProdTaskRefiner``;
- ``PredictingAtlasAnalTaskRefiner`` wraps
  ``pandajedi.jedirefine.AtlasAnalTaskRefiner:AtlasAnalTaskRefiner``;
- ``PredictingGenTaskRefiner`` wraps
  ``pandajedi.jedirefine.GenTaskRefiner:GenTaskRefiner``.

Any other refiner: ``PredictingMyRefiner = wrapping("site.refiners:MyRefiner")`` in a
module of the site, and that module's name in ``modConfig``. The wrapped class is
named by the attribute, not by a setting, because JEDI's ``modConfig`` names only a
module and an attribute (``:``-separated), because a VO can use different refiners
per label (ATLAS: production and analysis), and because the choice must not depend on
panda-predictor's own settings and imports, which are exactly what may fail.

What JEDI gets is an instance of a subclass of the wrapped class (built on first
use), so ``initializeRefiner``, ``doRefine``, ``doPreProRefine``, ``refresh`` and every
attribute JEDI reads are the wrapped refiner's own. The only override is
:meth:`extractCommon`: before the wrapped one it predicts the task
(:func:`panda_predictor.plugins.jedi_prediction.predict_into_map`) and, when the
decision is ``applied``, puts the predicted ``ramCount``/``cpuTime``/``ioIntensity``
(with units) and ``skipScout`` into the map, so the wrapped refiner builds the task
spec from them (no ``US=`` scout rule; resource type and work queue from the
predicted values). Right after, it takes them out of the map again (a key still
holding our value gets the requester's value back, or is removed) and sets the task
spec's ``walltime``/``walltimeUnit``. So the map JEDI goes on with, read by
``doRefine`` and saved as the task's original parameters (``JEDI_TaskParams``) when
the wrapped refiner points ``updatedTaskParams`` at it (``GenTaskRefiner``,
``AtlasAnalTaskRefiner``), carries no ``skipScout`` and no predicted value: the
prediction lives only in the task spec (``JEDI_TASKS``).

It fails open. This module imports only the standard library; the prediction code is
imported per task, inside the boundary. An import error, any exception of ours, the
kill switch or a ``kept_scouts`` decision leave the map exactly as it came, so the
wrapped refiner runs unchanged (scouts run); a failure is logged with ``jediTaskID=``
and counted in ``panda_predictor_fallbacks_total{hook="jedi"}`` (``reason=
"import_error"`` for an import), and in :data:`FALLBACK_COUNTS` even when the metrics
cannot be imported. The wrapped refiner's own exceptions propagate unchanged.

A wrapped class that cannot be imported is a configuration error: building the
refiner raises :class:`ImportError` naming the attribute and the class, which JEDI's
plugin factory reports when the refiner agent starts. There is no fallback to another
refiner: it would silently drop the configured refiner's own logic.
"""

from __future__ import annotations

import collections
import copy
import importlib
import logging
import threading
from collections.abc import MutableMapping
from typing import Any

log = logging.getLogger(__name__)

#: Label of this hook in the panda_predictor_* metrics.
HOOK = "jedi"

#: Fallbacks counted in this module by reason, also when the metrics cannot be imported.
FALLBACK_COUNTS: collections.Counter[str] = collections.Counter()


class _Prediction:
    """Put before the wrapped refiner's class: predicts in extractCommon, nothing else.

    Parameters
    ----------
    taskBufferIF, ddmIF:
        JEDI's task buffer and DDM interfaces, passed through to the wrapped refiner.
    client, settings, audit_bind:
        Prediction client, panda-predictor settings and audit database (see
        :func:`panda_predictor.plugins.jedi_prediction.predict_into_map`); default:
        built once per process from the environment.
    """

    def __init__(
        self,
        taskBufferIF: Any,
        ddmIF: Any,
        client: Any = None,
        settings: Any = None,
        audit_bind: Any = None,
    ) -> None:
        super().__init__(taskBufferIF, ddmIF)  # type: ignore[call-arg]
        self._pp_options = {
            "client": client,
            "settings": settings,
            "audit_bind": audit_bind,
        }

    def extractCommon(
        self,
        jediTaskID: int,
        taskParamMap: MutableMapping[str, Any],
        workQueueMapper: Any,
        splitRule: str | None,
    ) -> None:
        """Predict into the map, refine as the wrapped refiner does, take ours out."""
        applied = _predict(jediTaskID, taskParamMap, self._pp_options)
        try:
            super().extractCommon(  # type: ignore[misc]
                jediTaskID, taskParamMap, workQueueMapper, splitRule
            )
        finally:
            if applied is not None:
                _take_out(taskParamMap, applied.values, applied.before)
        if applied is None:
            return
        task_spec = self.taskSpec  # type: ignore[attr-defined]
        if task_spec.useScout():
            # AtlasAnalTaskRefiner drops skipScout of tasks that are not "official".
            log.warning(
                "jediTaskID=%s %s kept the scouts: they will replace the predicted "
                "values",
                jediTaskID,
                type(self).__name__,
            )
        if applied.walltime is not None:
            task_spec.walltime, task_spec.walltimeUnit = applied.walltime


def _predict(
    jedi_task_id: int, task_param_map: MutableMapping[str, Any], options: dict
) -> Any:
    """Return what the prediction put into the map, or None; never raises."""
    original = copy.deepcopy(dict(task_param_map))
    try:
        from panda_predictor.plugins import jedi_prediction

        return jedi_prediction.predict_into_map(jedi_task_id, task_param_map, **options)
    except Exception as exc:  # noqa: BLE001  the fail-open boundary, imports too
        if task_param_map != original:
            task_param_map.clear()
            task_param_map.update(original)
        reason = "import_error" if isinstance(exc, ImportError) else type(exc).__name__
        _count_fallback(reason)
        log.warning(
            "jediTaskID=%s no prediction, the wrapped refiner runs unchanged "
            "(reason=%s): %s: %s",
            jedi_task_id,
            reason,
            type(exc).__name__,
            exc,
        )
        return None


def _take_out(
    task_param_map: MutableMapping[str, Any],
    values: dict[str, Any],
    before: dict[str, Any],
) -> None:
    """Give the map back the requester's values where it still holds ours."""
    for key, value in values.items():
        if key not in task_param_map or task_param_map[key] != value:
            continue  # the wrapped refiner changed it: its value stays
        if key in before:
            task_param_map[key] = before[key]
        else:
            del task_param_map[key]


def _count_fallback(reason: str) -> None:
    FALLBACK_COUNTS[reason] += 1
    try:
        from panda_predictor.metrics import FALLBACKS
    except Exception as exc:  # noqa: BLE001  FALLBACK_COUNTS stands in
        log.debug("panda_predictor_fallbacks_total not importable: %s", exc)
        return
    FALLBACKS.labels(HOOK, reason).inc()


class RefinerFactory:
    """Build the refiner ``target`` plus the prediction; JEDI calls it as a class.

    Parameters
    ----------
    target:
        The wrapped refiner, as ``"module.path:ClassName"``.
    name:
        Name of the built class, in JEDI's logs and in errors; default
        ``"Predicting" + ClassName``.
    """

    def __init__(self, target: str, name: str | None = None) -> None:
        module_name, colon, class_name = target.partition(":")
        if not (module_name and colon and class_name) or ":" in class_name:
            raise ValueError(
                "The wrapped refiner must be given as 'module.path:ClassName'. "
                f"Got {target!r} instead."
            )
        self.target = target
        self.__name__ = name or f"Predicting{class_name}"
        self._lock = threading.Lock()
        self._class: type | None = None

    def refiner_class(self) -> type:
        """Return the subclass of the wrapped refiner, importing it on first use."""
        with self._lock:
            if self._class is None:
                module_name, _, class_name = self.target.partition(":")
                try:
                    wrapped = getattr(importlib.import_module(module_name), class_name)
                except (ImportError, AttributeError) as exc:
                    raise ImportError(
                        f"{self.__name__} wraps the refiner {self.target!r}, which "
                        f"cannot be imported: {type(exc).__name__}: {exc}"
                    ) from exc
                self._class = type(
                    self.__name__,
                    (_Prediction, wrapped),
                    {
                        "__module__": __name__,
                        "__doc__": f"{class_name} with panda-predictor's prediction.",
                        "wrapped": wrapped,
                    },
                )
            return self._class

    def __call__(self, taskBufferIF: Any, ddmIF: Any, *args: Any, **kwargs: Any) -> Any:
        """Build one refiner, as JEDI's plugin factory does with ``cls(*args)``."""
        return self.refiner_class()(taskBufferIF, ddmIF, *args, **kwargs)

    def __repr__(self) -> str:
        return f"wrapping({self.target!r}, name={self.__name__!r})"


def wrapping(target: str, name: str | None = None) -> RefinerFactory:
    """Return a refiner JEDI can load: ``target`` with the prediction on top."""
    return RefinerFactory(target, name)


PredictingAtlasProdTaskRefiner = wrapping(
    "pandajedi.jedirefine.AtlasProdTaskRefiner:AtlasProdTaskRefiner"
)
PredictingAtlasAnalTaskRefiner = wrapping(
    "pandajedi.jedirefine.AtlasAnalTaskRefiner:AtlasAnalTaskRefiner"
)
PredictingGenTaskRefiner = wrapping(
    "pandajedi.jedirefine.GenTaskRefiner:GenTaskRefiner"
)


def reset_shared_client() -> None:
    """Forget the process-wide settings and client (tests, or after a config change)."""
    from panda_predictor.plugins import jedi_prediction

    jedi_prediction.reset_shared_client()


__all__ = [
    "FALLBACK_COUNTS",
    "HOOK",
    "PredictingAtlasAnalTaskRefiner",
    "PredictingAtlasProdTaskRefiner",
    "PredictingGenTaskRefiner",
    "RefinerFactory",
    "reset_shared_client",
    "wrapping",
]
