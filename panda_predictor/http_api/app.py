"""The Flask application factory of the prediction service.

One blueprint per resource (predictions, tasks, models, health, metrics), JSON errors
everywhere, a 1 MiB body limit, request metrics and load shedding in front of it all.
The registry champion is loaded in a background thread (``/readyz`` says "loading"
meanwhile); see docs/service.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from flask import Flask

from model_registry.tracking import disable_mlflow_telemetry
from panda_predictor.http_api import health, metrics, models, predictions, tasks
from panda_predictor.http_api.admission import LoadShedder
from panda_predictor.http_api.errors import register_error_handlers
from panda_predictor.http_api.state import ServiceState
from panda_predictor.serving.history_refresher import HistoryRefresher
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import Settings, get_settings

#: Largest request body accepted (413 above it).
MAX_BODY_BYTES = 1024 * 1024


def create_app(
    settings: Settings | None = None,
    predictor_loader: Callable[[], Predictor] | None = None,
    history_refresh_seconds: float = 0.0,
    model_refresh_seconds: float = 300.0,
    background_load: bool | None = None,
) -> Flask:
    """Build the service app.

    Parameters
    ----------
    settings:
        Service settings; default: the process settings (environment, config file).
    predictor_loader:
        Returns the predictor to serve; default: the registry champion with the
        local cache as fallback (``load_champion``).
    history_refresh_seconds:
        If > 0, keep a recent-history index read from the database every that many
        seconds, for the history features of ``POST /v1/predictions`` (0: off,
        history features are NaN).
    model_refresh_seconds:
        How often to re-resolve the champion (a promoted model is picked up).
    background_load:
        Load the model in a background thread (True) or before returning (False);
        default: in the background for the registry champion, which takes seconds,
        at once for an injected loader (it usually returns a loaded predictor).

    The app's ``wsgi_app`` is a :class:`LoadShedder`; a server that can tell how
    many requests wait sets its ``waiting`` probe (``panda-predictor serve`` does).
    """
    disable_mlflow_telemetry()  # before the champion loader imports MLflow
    # MLflow keeps one engine per store URI for the whole process; pooled SQLite
    # connections would keep reading a store file that was since replaced (a store
    # put back after it went missing), so the service would never recover. Without
    # a pool each registry call opens the file that is there now.
    os.environ.setdefault("MLFLOW_SQLALCHEMYSTORE_POOLCLASS", "NullPool")
    settings = settings or get_settings()
    app = Flask("panda_predictor.http_api")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.json.sort_keys = False  # type: ignore[attr-defined]
    state = ServiceState(
        settings, predictor_loader, refresh_seconds=model_refresh_seconds
    )
    if history_refresh_seconds > 0:
        state.history = HistoryRefresher(
            lambda: _read_history(state), history_refresh_seconds, hook="http"
        )
        state.history.start()
    app.extensions["panda_predictor"] = state
    if background_load is None:
        background_load = predictor_loader is None
    if background_load:
        state.start_loading()
    else:
        state.load_now()
    app.wsgi_app = LoadShedder(  # type: ignore[method-assign]
        app.wsgi_app, settings.http_max_waiting_requests
    )
    for module in (predictions, tasks, models, health, metrics):
        app.register_blueprint(module.bp)
    register_error_handlers(app)
    metrics.instrument(app)
    app.extensions[metrics.DRIFT_EXTENSION] = metrics.DriftGauges(
        lambda: _last_drift_run(state)
    )
    return app


def _last_drift_run(state: ServiceState):
    """Return the newest drift run recorded in the database, or None."""
    from panda_predictor.db.drift_runs import recent_drift_runs

    runs = recent_drift_runs(state.engine(), 1, state.settings)
    return runs[0] if runs else None


def _read_history(state: ServiceState):
    """Return the recent labelled history indexed as of now (features + experts)."""
    from panda_predictor.serving.recent import read_serving_history

    loaded = state.loaded
    bundle = loaded.bundle if loaded is not None else None
    return read_serving_history(state.engine(), state.settings, bundle=bundle)
