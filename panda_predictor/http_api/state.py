"""What the service holds between requests: the predictor, the engine, the history.

The champion predictor is loaded lazily on first use and re-resolved every
``refresh_seconds`` (a newly promoted champion is picked up; if that fails the loaded
one stays). A failed load is remembered for ``retry_seconds`` so a broken registry
does not slow every request down; callers get :class:`ModelUnavailable` and answer
503, and the caller keeps its scouts (fail open). The database engine is made only
when a database endpoint is used; ``POST /v1/predictions`` never touches it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from panda_predictor.metrics import FALLBACKS, MODEL_VERSION
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)


class ModelUnavailable(RuntimeError):
    """No model can serve right now; the message says why."""


class ServiceState:
    """Lazily loaded predictor, database engine and optional history index.

    Parameters
    ----------
    settings:
        The service settings (database, registry, token).
    predictor_loader:
        Returns the predictor; default: the registry champion (with cache fallback).
    refresh_seconds:
        How often to re-resolve the champion (0: never).
    retry_seconds:
        How long a failed load is remembered before trying again.
    """

    def __init__(
        self,
        settings: Settings,
        predictor_loader: Callable[[], Predictor] | None = None,
        refresh_seconds: float = 300.0,
        retry_seconds: float = 10.0,
    ) -> None:
        self.settings = settings
        self._loader = predictor_loader or self._load_champion
        self.source = "injected" if predictor_loader else "registry"
        self.refresh_seconds = refresh_seconds
        self.retry_seconds = retry_seconds
        self._lock = threading.Lock()
        self._predictor: Predictor | None = None
        self._loaded_at = 0.0
        self._failed_at = 0.0
        self.load_error: str | None = None
        self._engine: Any = None
        self.history: Any = None

    def _load_champion(self) -> Predictor:
        from panda_predictor.serving.loader import load_champion_with_source

        predictor, self.source = load_champion_with_source(self.settings)
        return predictor

    def predictor(self) -> Predictor:
        """Return the predictor, loading or refreshing it; raise ModelUnavailable."""
        now = time.monotonic()
        current = self._predictor
        due = current is None or (
            self.refresh_seconds and now - self._loaded_at > self.refresh_seconds
        )
        if not due:
            assert current is not None
            return current
        with self._lock:
            if self._predictor is not None and self._predictor is not current:
                return self._predictor  # another thread just (re)loaded it
            if self._predictor is None and now - self._failed_at < self.retry_seconds:
                raise ModelUnavailable(self.load_error or "model not loaded")
            self._reload(now)
            if self._predictor is None:
                raise ModelUnavailable(self.load_error or "model not loaded")
            return self._predictor

    def _reload(self, now: float) -> None:
        try:
            predictor = self._loader()
        except Exception as exc:  # noqa: BLE001  fail open: keep what we have
            self._failed_at = now
            self.load_error = f"{type(exc).__name__}: {exc}"
            FALLBACKS.labels("http", type(exc).__name__).inc()
            log.error(
                "model unavailable, callers keep their scouts: %s", self.load_error
            )
            if self._predictor is not None:
                self._loaded_at = now  # keep serving the loaded one; retry later
            return
        self._predictor, self._loaded_at, self.load_error = predictor, now, None
        try:
            MODEL_VERSION.labels(predictor.model_name).set(
                float(predictor.model_version)
            )
        except ValueError:
            log.warning(
                "model version %r is not a number; gauge not set",
                predictor.model_version,
            )

    @property
    def loaded(self) -> Predictor | None:
        """Return the loaded predictor without trying to load one."""
        return self._predictor

    def engine(self) -> Any:
        """Return the database engine, made on first use (raises DatabaseError)."""
        if self._engine is None:
            from panda_predictor.db.engine import make_engine

            with self._lock:
                if self._engine is None:
                    self._engine = make_engine(self.settings)
        return self._engine

    def check_database(self) -> None:
        """Run ``SELECT 1``; raise DatabaseError when the database is unreachable."""
        import sqlalchemy as sa

        from panda_predictor.db.engine import translate_errors

        engine = self.engine()
        with translate_errors(engine), engine.connect() as conn:
            conn.execute(sa.text("SELECT 1 /* service.readyz */"))

    def close(self) -> None:
        """Stop the history refresher and dispose of the engine's connections."""
        if self.history is not None:
            self.history.stop()
        if self._engine is not None:
            self._engine.dispose()
