"""The HTTP prediction service (Flask): see :func:`create_app` and docs/service.md.

The app is imported on first use of ``create_app``, so importing a submodule (the
``predict`` command uses :mod:`.results`) does not pay for Flask and the routes.
Here: routes, input limits, admission, the waitress server. Not here: the prediction
(serving/) and the write-back it can trigger (hook/).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from panda_predictor.http_api.app import MAX_BODY_BYTES, create_app

__all__ = ["MAX_BODY_BYTES", "create_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from panda_predictor.http_api import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
