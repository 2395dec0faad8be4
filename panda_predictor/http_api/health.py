"""``GET /healthz`` (the process answers) and ``GET /readyz`` (it can do its job).

``/readyz`` never loads the model itself: it reports the background load
("loading") and starts one when the last attempt failed long enough ago. It checks
that the database answers *and* holds the tables the endpoints use. Its body names
each check without infrastructure details (URLs, hosts, users, folders): those are
logged, since anyone can call this endpoint.
"""

from __future__ import annotations

import logging

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from panda_predictor.http_api.predictions import state
from panda_predictor.http_api.state import MissingTables, ModelUnavailable

log = logging.getLogger(__name__)

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> ResponseReturnValue:
    """Return 200 while the process is alive (for a liveness probe)."""
    return jsonify({"status": "ok"})


def _model_check() -> dict[str, str]:
    service = state()
    try:
        predictor = service.predictor()
    except ModelUnavailable as exc:
        status = "loading" if exc.loading else "failed"
        return {"status": status, "detail": str(exc)}
    return {
        "status": "ok",
        "detail": f"{predictor.model_name} version {predictor.model_version} "
        f"({service.source})",
    }


def _database_check() -> dict[str, str]:
    from panda_predictor.db.engine import DatabaseError

    try:
        state().check_database()
    except MissingTables as exc:
        log.error("readiness: %s", exc)
        return {"status": "failed", "detail": f"missing tables: {', '.join(exc.names)}"}
    except DatabaseError as exc:
        log.error("readiness: database unavailable: %s", exc)
        return {
            "status": "failed",
            "detail": "unreachable (the reason is in the service log)",
        }
    return {"status": "ok", "detail": "reachable, tables present"}


@bp.get("/readyz")
def readyz() -> ResponseReturnValue:
    """Return 200 when the model is loaded and the database usable, else 503.

    ``status`` is ``ready``, ``loading`` (the model is being loaded; nothing else
    failed), ``draining`` (shutting down) or ``not ready``; ``failed`` lists the
    checks that are not ok.
    """
    checks = {"model": _model_check(), "database": _database_check()}
    failed = [name for name, c in checks.items() if c["status"] != "ok"]
    if state().draining.is_set():
        status = "draining"
    elif not failed:
        status = "ready"
    elif failed == ["model"] and checks["model"]["status"] == "loading":
        status = "loading"
    else:
        status = "not ready"
    body = {"status": status, "failed": failed, "checks": checks}
    return jsonify(body), 200 if status == "ready" else 503
