"""JSON errors with real status codes: ``{"code", "name", "description"}``.

Every error the service returns has this body, whether Flask raised it (404 unknown
route, 405 wrong method, 413 body too large, 400 malformed JSON) or our code did
(422 invalid task definition, 401/503 for writes, 503 model unavailable). An
unexpected exception is logged with its traceback and answered 500 with no details.

Bodies never carry infrastructure details (registry URL, cache folder, database
user, host or name): anyone can call the service, so those go to the log, and the
body says what happened and what the caller should do.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from werkzeug.exceptions import (
    HTTPException,
    InternalServerError,
    UnprocessableEntity,
)
from werkzeug.exceptions import ServiceUnavailable as _ServiceUnavailable

from panda_predictor.taskdef import TaskDefinitionError

log = logging.getLogger(__name__)


#: Seconds a caller is asked to wait (``Retry-After``) after a temporary 503.
RETRY_AFTER_SECONDS = 5


class ServiceUnavailable(_ServiceUnavailable):
    """503 with a reason (no model, database down, writes disabled, overloaded).

    ``retry_after`` (seconds) adds a ``Retry-After`` header: the condition is
    temporary (loading, overloaded, database down) and a retry may succeed.
    """

    description = "The service cannot answer right now."


def error_response(exc: HTTPException) -> Response:
    """Return ``exc`` as the JSON error body with its status code and headers."""
    code = exc.code or 500
    body = {"code": code, "name": exc.name, "description": exc.description}
    response = jsonify(body)
    response.status_code = code
    for key, value in exc.get_headers():
        if key.lower() != "content-type":
            response.headers[key] = value
    return response


def register_error_handlers(app: Flask) -> None:
    """Answer every error of ``app`` with the JSON error body."""

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Response:
        return error_response(exc)

    @app.errorhandler(TaskDefinitionError)
    def _invalid(exc: TaskDefinitionError) -> Response:
        return error_response(UnprocessableEntity(str(exc)))

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Response:
        log.exception("unexpected error while serving a request")
        return error_response(InternalServerError())
