"""``GET /healthz`` (the process answers) and ``GET /readyz`` (it can do its job)."""

from __future__ import annotations

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from panda_predictor.http_api.predictions import state
from panda_predictor.http_api.state import ModelUnavailable

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> ResponseReturnValue:
    """Return 200 while the process is alive (for a liveness probe)."""
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz() -> ResponseReturnValue:
    """Return 200 when the model is loaded and the database reachable, else 503.

    The body names each check and, for a failed one, why it failed.
    """
    service = state()
    checks: dict[str, dict[str, str]] = {}
    try:
        predictor = service.predictor()
        checks["model"] = {
            "status": "ok",
            "detail": f"{predictor.model_name} version {predictor.model_version}",
        }
    except ModelUnavailable as exc:
        checks["model"] = {"status": "failed", "detail": str(exc)}
    try:
        service.check_database()
        checks["database"] = {"status": "ok", "detail": "reachable"}
    except Exception as exc:  # noqa: BLE001  any failure means "not ready"
        checks["database"] = {"status": "failed", "detail": str(exc)}
    ready = all(c["status"] == "ok" for c in checks.values())
    failed = [name for name, c in checks.items() if c["status"] != "ok"]
    body = {
        "status": "ready" if ready else "not ready",
        "failed": failed,
        "checks": checks,
    }
    return jsonify(body), 200 if ready else 503
