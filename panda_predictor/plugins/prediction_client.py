"""Get a prediction for one task parameter map, in-process or from the HTTP service.

The JEDI refiner (:mod:`panda_predictor.plugins.jedi_refiner`) runs inside JEDI,
before anything about the task is in the database. It converts PanDA's camelCase
parameter map with :mod:`panda_predictor.taskdef` (file and event counts are unknown
at that point: NaN) and asks one of two clients:

- :class:`InProcessClient` loads the registry's champion once (through
  :func:`panda_predictor.serving.loader.load_champion`, which falls back to the local
  cache) and reloads it every ``reload_seconds`` to pick up a new champion; like the
  HTTP service it keeps the recent labelled history fresh in a background thread
  (:class:`~panda_predictor.serving.history_refresher.HistoryRefresher`, reading the
  database of ``db_url``, through the caller's engine when it is given one: the
  refiner's audit engine, one pool per process), so the history features and the
  expert combination are those of the service and the database hook;
- :class:`~panda_predictor.plugins.http_client.HttpClient` posts the definition to
  ``POST /v1/predictions`` of the panda-predictor service with a strict total
  timeout (stdlib only; its own module).

Both raise :class:`PredictionUnavailable` (with a short ``reason`` used as the metric
label) when no prediction can be made; the refiner turns that into "keep scouts".
:func:`~panda_predictor.plugins.jedi_prediction.client_from_environment` picks one
from the ``refiner_*`` settings, which
:func:`~panda_predictor.settings.load_settings` reads from the
``PANDA_PREDICTOR_REFINER_*`` environment variables (or the config file), because
JEDI builds a refiner from ``modConfig`` with no arguments of ours.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from panda_predictor.core.domain.task_prediction import TaskPrediction
from panda_predictor.core.domain.units import prediction_to_panda
from panda_predictor.db.audit_writer import panda_value
from panda_predictor.metrics import FALLBACKS
from panda_predictor.serving.history_refresher import HistoryRefresher
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

# The clients' defaults are the settings' own, so a client built by hand and one
# built from the settings agree.
DEFAULT_TIMEOUT: float = Settings.model_fields["refiner_timeout"].default
DEFAULT_RELOAD_SECONDS: float = Settings.model_fields["refiner_reload_seconds"].default
#: Label of the refiner in the panda_predictor_* metrics (history reads that fail).
HOOK = "jedi"

#: Parameter-map keys of the predicted targets: (value key, unit key).
PARAM_MAP_KEYS: dict[str, tuple[str, str]] = {
    "ramcount": ("ramCount", "ramUnit"),
    "cputime": ("cpuTime", "cpuTimeUnit"),
    "iointensity": ("ioIntensity", "ioIntensityUnit"),
}
#: Where a task parameter map holds the requester's value and unit of each target
#: (PanDA's TaskRefinerBase reads ``ramUnit`` before ``ramCountUnit``).
REQUESTED_KEYS: dict[str, tuple[str, str | tuple[str, ...]]] = {
    "ramcount": ("ramCount", ("ramUnit", "ramCountUnit")),
    "cputime": ("cpuTime", "cpuTimeUnit"),
    "iointensity": ("ioIntensity", "ioIntensityUnit"),
    "walltime": ("walltime", "walltimeUnit"),
}
#: Counts that describe the input once JEDI has filled JEDI_DATASETS; in a parameter
#: map the same names are user limits, so they are not used as features.
_COUNT_KEYS = frozenset(
    {
        "nFiles",
        "nEvents",
        "nfiles",
        "nevents",
        "nfiles_sum",
        "nevents_sum",
        "n_input_datasets",
        "nInputDatasets",
        "jediTaskID",
        "jeditaskid",
        "taskID",
    }
)


class PredictionUnavailable(RuntimeError):
    """No prediction could be made for a task; the task keeps its scouts.

    Parameters
    ----------
    message:
        What went wrong, for the log line.
    reason:
        Short, low-cardinality label for ``panda_predictor_fallbacks_total``.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class PredictionClient(Protocol):
    """Anything that predicts one task definition (camelCase or our names)."""

    def predict(self, definition: Mapping[str, Any]) -> TaskPrediction:
        """Return the prediction and decision for one task definition."""
        ...


def _definition_keys() -> frozenset[str]:
    from panda_predictor.taskdef import TaskDefinition

    names: set[str] = set()
    for field in TaskDefinition.model_fields.values():
        alias = field.validation_alias
        names.update(getattr(alias, "choices", ()) or ())
    return frozenset(str(n) for n in names) - _COUNT_KEYS


def definition_from_param_map(
    jedi_task_id: int, task_param_map: Mapping[str, Any]
) -> dict[str, Any]:
    """Return the task definition the models read, taken from a JEDI parameter map.

    Only the keys :mod:`panda_predictor.taskdef` knows are kept (a real map holds
    dozens more); file and event counts are left out because JEDI has not counted
    the input yet.

    Parameters
    ----------
    jedi_task_id:
        The task's jediTaskID (JEDI passes it to ``extractCommon``).
    task_param_map:
        PanDA's task parameter map; it is not modified.
    """
    if isinstance(jedi_task_id, bool) or not isinstance(jedi_task_id, int):
        raise ValueError(
            f"The 'jediTaskID' field must be an integer. Got {jedi_task_id!r} instead."
        )
    keys = _definition_keys()
    definition = {k: v for k, v in task_param_map.items() if k in keys}
    definition["jediTaskID"] = jedi_task_id
    return definition


def param_map_fields(
    prediction: TaskPrediction, fixed_units: bool | None = None
) -> dict[str, Any]:
    """Return the parameter-map entries that apply a prediction and skip the scouts.

    ``ramCount``/``ramUnit``, ``cpuTime``/``cpuTimeUnit`` and
    ``ioIntensity``/``ioIntensityUnit`` in PanDA's stored form (see
    :func:`panda_predictor.db.audit_writer.panda_value`), plus ``skipScout``.
    """
    fields: dict[str, Any] = {}
    for target, (value_key, unit_key) in PARAM_MAP_KEYS.items():
        if target in prediction.targets:
            value, unit = panda_value(prediction.targets[target], fixed_units)
            fields[value_key], fields[unit_key] = value, unit
    fields["skipScout"] = True
    return fields


def walltime_of(prediction: TaskPrediction) -> tuple[int, str] | None:
    """Return the (walltime, walltimeUnit) to set on the task spec, if predicted."""
    target = prediction.targets.get("walltime")
    if target is None:
        return None
    return prediction_to_panda(target)


class InProcessClient:
    """Predict with the champion model loaded in this process (cached, reloaded).

    Parameters
    ----------
    settings:
        Registry, model name and cache folder of the champion; the database of
        ``db_url`` the history is read from.
    predictor_factory:
        Returns the predictor (default: ``load_champion(settings)``).
    history_factory:
        Returns the history to predict with, called at each (re)load of the
        predictor (tests); default: the background refresher's current index.
    reload_seconds:
        Age after which the champion is looked up again.
    history_refresh_seconds:
        Without a ``history_factory``: seconds between background reads of the
        recent labelled history (0: no history, its features are NaN); default:
        the ``refiner_history_refresh_seconds`` setting.
    engine_provider:
        Returns the engine the history is read through, called at each read; the
        caller owns it (the JEDI refiner hands over its audit engine, so a JEDI
        process holds one connection pool), :meth:`close` leaves it open, and a
        forked child's caller drops the parent's pooled connections. Default: an
        engine of the client's own on ``db_url``, disposed by :meth:`close`.
    """

    def __init__(
        self,
        settings: Settings,
        predictor_factory: Callable[[], Any] | None = None,
        history_factory: Callable[[], Any] | None = None,
        reload_seconds: float = DEFAULT_RELOAD_SECONDS,
        history_refresh_seconds: float | None = None,
        engine_provider: Callable[[], Any] | None = None,
    ) -> None:
        self.settings = settings
        self.predictor_factory = predictor_factory
        self.history_factory = history_factory
        self.engine_provider = engine_provider
        self.reload_seconds = reload_seconds
        if history_refresh_seconds is None:
            history_refresh_seconds = settings.refiner_history_refresh_seconds
        self.history_refresh_seconds = history_refresh_seconds
        self._lock = threading.Lock()
        self._predictor: Any = None
        self._history: Any = None
        self._loaded_at = 0.0
        self._refresher: HistoryRefresher | None = None
        self._refresher_pid = os.getpid()
        self._history_engine: Any = None

    def _load(self) -> tuple[Any, Any]:
        if self.predictor_factory is not None:
            predictor = self.predictor_factory()
        else:
            from panda_predictor.serving.loader import load_champion

            predictor = load_champion(self.settings)
        history = self.history_factory() if self.history_factory else None
        return predictor, history

    def current(self) -> tuple[Any, Any]:
        """Return (predictor, history), loading them on first use and when stale.

        Without a ``history_factory`` the history is the background refresher's
        current index (started here on first use), None until its first read
        succeeds or when the history is off; it is never read here.
        """
        with self._lock:
            age = time.monotonic() - self._loaded_at
            if self._predictor is None or age >= self.reload_seconds:
                try:
                    self._predictor, self._history = self._load()
                except Exception as exc:
                    if self._predictor is None:
                        raise PredictionUnavailable(
                            f"no model: {type(exc).__name__}: {exc}", "no_model"
                        ) from exc
                    log.warning(
                        "champion reload failed, keeping version %s: %s",
                        self._predictor.model_version,
                        exc,
                    )
                self._loaded_at = time.monotonic()
            if self.history_factory is not None:
                return self._predictor, self._history
            return self._predictor, self._refreshed_history()

    @property
    def history_refresher(self) -> HistoryRefresher | None:
        """Return the background history refresher, None before the first use."""
        return self._refresher

    def _refreshed_history(self) -> Any:
        """Return the refresher's current index, starting the refresher first.

        Never raises: a thread that cannot start is logged and counted, and the
        task is predicted without history (the next one tries again).
        """
        if self.history_refresh_seconds <= 0:
            return None
        if self._refresher is not None and self._refresher_pid != os.getpid():
            # A forked child has the parent's refresher but not its thread: the
            # history would never change again. Start its own, on its own
            # connections (the parent's stay open for the parent; a provided
            # engine is its owner's to renew).
            self._refresher = None
            engine, self._history_engine = self._history_engine, None
            if engine is not None:
                engine.dispose(close=False)
        if self._refresher is None:
            refresher = HistoryRefresher(
                self._read_history, self.history_refresh_seconds, HOOK
            )
            try:
                refresher.start()
            except RuntimeError as exc:  # no thread left: predict without history
                FALLBACKS.labels(HOOK, "history_" + type(exc).__name__).inc()
                log.warning("recent history refresher not started: %s", exc)
                return None
            self._refresher, self._refresher_pid = refresher, os.getpid()
        return self._refresher.index

    def _read_history(self) -> Any:
        """Read the recent history indexed as of now (in the refresher's thread).

        The index and the current champion's expert records are built here too,
        so no prediction has to build them.
        """
        from panda_predictor.serving.recent import read_serving_history

        bundle = getattr(self._predictor, "bundle", None)
        return read_serving_history(self._engine(), self.settings, bundle=bundle)

    def _engine(self) -> Any:
        """Return the provided engine, else the client's own (built on first use)."""
        if self.engine_provider is not None:
            return self.engine_provider()
        if self._history_engine is None:  # one engine (and pool) per client
            from panda_predictor.db.engine import make_engine

            self._history_engine = make_engine(self.settings)
        return self._history_engine

    def close(self) -> None:
        """Stop the history refresher and dispose of the client's own engine.

        A provided engine stays open: it is its owner's to dispose of.
        """
        with self._lock:
            refresher, self._refresher = self._refresher, None
        if refresher is not None:
            refresher.stop()  # waits for a read under way, so the engine is free
        engine, self._history_engine = self._history_engine, None
        if engine is not None:
            engine.dispose()

    def predict(self, definition: Mapping[str, Any]) -> TaskPrediction:
        """Return the prediction for one definition; raise PredictionUnavailable."""
        from panda_predictor.taskdef import read_task_definitions

        try:
            tasks = read_task_definitions(dict(definition))
        except ValueError as exc:
            raise PredictionUnavailable(str(exc), "invalid_task") from exc
        predictor, history = self.current()
        from panda_predictor.serving.decision import decide

        predictions = decide(predictor, tasks, history)
        if len(predictions) != 1:
            raise PredictionUnavailable(
                f"expected one prediction, got {len(predictions)}", "bad_response"
            )
        return predictions[0]


__all__ = [
    "HOOK",
    "InProcessClient",
    "PARAM_MAP_KEYS",
    "REQUESTED_KEYS",
    "PredictionClient",
    "PredictionUnavailable",
    "definition_from_param_map",
    "param_map_fields",
    "walltime_of",
]
