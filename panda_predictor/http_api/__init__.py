"""The HTTP prediction service (Flask): see :func:`create_app` and docs/service.md."""

from panda_predictor.http_api.app import MAX_BODY_BYTES, create_app

__all__ = ["MAX_BODY_BYTES", "create_app"]
