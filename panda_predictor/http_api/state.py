"""What the service holds between requests: the predictor, the engine, the history.

The champion predictor is loaded in a background thread, never on a request thread:
loading takes seconds (TensorFlow, XGBoost, the registry), and a request that waited
for it would hold one of the few server threads, so ``/healthz`` starved behind it.
Until the first load ends, requests get :class:`ModelUnavailable` ("loading") and
answer 503 with ``Retry-After``; callers keep their scouts (fail open). The champion
is re-resolved every ``refresh_seconds`` in the background too (the loaded one
serves meanwhile, and stays if that fails). A failed first load is retried after
``retry_seconds``, so a registry that comes back is picked up without a restart.

The database engine is made only when a database endpoint is used; ``POST
/v1/predictions`` never touches it. After a database failure the engine's pooled
connections are dropped, so the next request reconnects to whatever is there now (a
database restarted, a SQLite file put back). A missing SQLite file is reported, never
created empty.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from panda_predictor.metrics import FALLBACKS, MODEL_VERSION
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)


class ModelUnavailable(RuntimeError):
    """No model can serve right now; the message is safe to show to any caller.

    ``loading`` says the first load is still running (retry soon); otherwise the
    last load failed and why is in the log, not in the message.
    """

    def __init__(self, message: str, loading: bool = False) -> None:
        super().__init__(message)
        self.loading = loading


LOADING = "The model is still loading."
FAILED = "No model could be loaded (the reason is in the service log)."


class ServiceState:
    """Background-loaded predictor, database engine and optional history index.

    Parameters
    ----------
    settings:
        The service settings (database, registry, token).
    predictor_loader:
        Returns the predictor; default: the registry champion (with cache fallback).
    refresh_seconds:
        How often to re-resolve the champion (0: never).
    retry_seconds:
        How long after a failed load the next one may start.
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
        self._failed_at = -float("inf")
        self._loading: threading.Thread | None = None
        self.load_error: str | None = None
        self._engine: Any = None
        self._sqlite_identity: tuple[int, int] | None = None
        self.history: Any = None
        #: Set on SIGTERM: /readyz says "draining" so no new traffic is sent here.
        self.draining = threading.Event()
        self.closed = False

    def _load_champion(self) -> Predictor:
        from panda_predictor.serving.loader import load_champion_with_source

        predictor, self.source = load_champion_with_source(self.settings)
        return predictor

    # -- the model ---------------------------------------------------------------

    @property
    def loading(self) -> bool:
        """Return whether a background load is running now."""
        thread = self._loading
        return thread is not None and thread.is_alive()

    def start_loading(self) -> bool:
        """Start a background (re)load unless one runs; return whether one started."""
        with self._lock:
            if self.loading:
                return False
            self._loading = threading.Thread(
                target=self.load_now, name="model-loader", daemon=True
            )
            self._loading.start()
        return True

    def wait_for_model(self, timeout: float | None = None) -> Predictor | None:
        """Wait for a running background load; return the loaded predictor or None."""
        thread = self._loading
        if thread is not None:
            thread.join(timeout)
        return self._predictor

    def predictor(self) -> Predictor:
        """Return the loaded predictor; raise ModelUnavailable, never load inline.

        A due refresh, or a retry after a failed load, starts in the background.
        """
        now = time.monotonic()
        current = self._predictor
        if current is not None:
            if self.refresh_seconds and now - self._loaded_at > self.refresh_seconds:
                self.start_loading()
            return current
        if self.loading:
            raise ModelUnavailable(LOADING, loading=True)
        if now - self._failed_at < self.retry_seconds:
            raise ModelUnavailable(FAILED)
        self.start_loading()
        raise ModelUnavailable(LOADING, loading=True)

    def load_now(self) -> None:
        """Load (or re-resolve) the predictor in this thread; log and count failures."""
        try:
            predictor = self._loader()
        except Exception as exc:  # noqa: BLE001  fail open: keep what we have
            self._failed_at = time.monotonic()
            self.load_error = f"{type(exc).__name__}: {exc}"
            FALLBACKS.labels("http", type(exc).__name__).inc()
            log.error(
                "model unavailable, callers keep their scouts: %s", self.load_error
            )
            if self._predictor is not None:
                self._loaded_at = time.monotonic()  # keep the loaded one; retry later
            return
        self._predictor, self.load_error = predictor, None
        self._loaded_at = time.monotonic()
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

    # -- the database ------------------------------------------------------------

    def _sqlite_file(self) -> Path | None:
        """Return the SQLite database file of the settings, or None (other dialect)."""
        from sqlalchemy.engine import make_url

        url = make_url(self.settings.database_url())
        if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
            return None
        return None if url.database.startswith("file:") else Path(url.database)

    def engine(self) -> Any:
        """Return the database engine, (re)made as needed; raise DatabaseError.

        For SQLite the file must exist (connecting would create it empty) and an
        engine opened on a file since replaced is remade, so its pooled connections
        do not keep reading the old one.
        """
        from panda_predictor.db.engine import DatabaseError, make_engine

        path = self._sqlite_file()
        identity = None
        if path is not None:
            try:
                stat = os.stat(path)
            except OSError:
                self.reset_engine()
                raise DatabaseError(
                    f"The SQLite database file {path} does not exist."
                ) from None
            identity = (stat.st_dev, stat.st_ino)
        with self._lock:
            if self._engine is not None and identity != self._sqlite_identity:
                self._engine.dispose()
                self._engine = None
            if self._engine is None:
                self._engine = make_engine(self.settings)
                self._sqlite_identity = identity
            return self._engine

    def reset_engine(self) -> None:
        """Drop the engine's pooled connections: the next use reconnects."""
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()

    def check_database(self) -> None:
        """Raise DatabaseError unless the database answers and has the tables we use.

        ``SELECT 1`` alone says "ok" on an empty database; the endpoints need
        JEDI_TASKS, JEDI_DATASETS, JOBSARCHIVED4 and the plugin's audit and
        version tables, so each is looked up in its configured schema.
        """
        import sqlalchemy as sa

        from panda_predictor.db.engine import (
            DatabaseError,
            get_panda_tables,
            get_plugin_tables,
            translate_errors,
        )

        engine = self.engine()
        try:
            with translate_errors(engine), engine.connect() as conn:
                conn.execute(sa.text("SELECT 1 /* service.readyz */"))
                inspector = sa.inspect(conn)
                panda = get_panda_tables(self.settings, conn)
                plugin = get_plugin_tables(self.settings, conn)
                tables = [
                    panda.jedi_tasks,
                    panda.jedi_datasets,
                    panda.jobsarchived4,
                    plugin.audit,
                    plugin.schema_version,
                ]
                missing = [
                    t.name
                    for t in tables
                    if not inspector.has_table(t.name, schema=t.schema)
                ]
        except DatabaseError:
            self.reset_engine()
            raise
        if missing:
            self.reset_engine()
            raise MissingTables(missing)

    def close(self) -> None:
        """Stop the history refresher and dispose of the engine's connections."""
        if self.history is not None:
            self.history.stop()
        self.reset_engine()
        self.closed = True


class MissingTables(RuntimeError):
    """The database answers but lacks tables the service reads or writes."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(
            f"The database lacks the tables {', '.join(names)}. Run 'panda-predictor "
            "db init' (add --with-panda-tables on a test database)."
        )
        self.names = names
