"""Predict through the panda-predictor service over HTTP, for the JEDI refiner.

:class:`HttpClient` posts a task definition to ``POST /v1/predictions`` and reads
the answer back into a :class:`~panda_predictor.core.domain.task_prediction.
TaskPrediction` (:func:`prediction_from_json`). It uses the standard library only
and bounds the whole exchange, not each socket operation, so a trickling server
cannot stall JEDI. Every failure is a
:class:`~panda_predictor.plugins.prediction_client.PredictionUnavailable` with a
short reason (``timeout``, ``unreachable``, ``http_<code>``, ``bad_response``),
which the refiner turns into "keep scouts". The client is picked by
:func:`~panda_predictor.plugins.jedi_prediction.client_from_environment` when
the ``refiner_url`` setting is set.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.plugins.prediction_client import (
    DEFAULT_TIMEOUT,
    PredictionUnavailable,
)

#: Largest HTTP response read (a prediction is about 2 kB).
MAX_RESPONSE_BYTES = 1 << 20


def _target_from_json(name: str, data: Mapping[str, Any]) -> TargetPrediction:
    probabilities = data.get("probabilities") or ()
    if isinstance(probabilities, Mapping):
        probabilities = probabilities.values()
    return TargetPrediction(
        target=name,
        class_index=int(data.get("class_index", data.get("class", 0))),
        class_label=str(data.get("class_label", data.get("label", ""))),
        lower=data.get("lower"),
        upper=data.get("upper"),
        value=float(data["value"]),
        unit=str(data["unit"]),
        confidence=float(data["confidence"]),
        probabilities=tuple(float(p) for p in probabilities),
    )


def prediction_from_json(data: Any, jedi_task_id: int) -> TaskPrediction:
    """Return the TaskPrediction of a ``POST /v1/predictions`` response body.

    Accepts one prediction object, a list of them, or ``{"predictions": [...]}``;
    each has ``decision``, ``reason``, model name/version (flat ``model_name`` /
    ``model_version`` or a ``model`` object) and ``targets`` (an object by target
    name, or a list of objects with a ``target`` key) holding at least ``value``,
    ``unit`` and ``confidence``, and may say ``early_remeasure`` (the refiner then
    marks the task it writes, as in process). Raises ValueError on any other
    shape.
    """
    if isinstance(data, Mapping) and "predictions" in data:
        data = data["predictions"]
    if isinstance(data, list):
        if len(data) != 1:
            raise ValueError(
                f"The response must hold one prediction. Got {len(data)} instead."
            )
        data = data[0]
    if not isinstance(data, Mapping):
        raise ValueError(
            f"The response must be a JSON object. Got {type(data).__name__} instead."
        )
    raw_targets = data.get("targets")
    if isinstance(raw_targets, list):
        raw_targets = {t["target"]: t for t in raw_targets}
    if not isinstance(raw_targets, Mapping):
        raise ValueError(
            f"The 'targets' field must be an object. Got {raw_targets!r} instead."
        )
    model = data.get("model")
    if not isinstance(model, Mapping):
        model = {}
    # Absent from an older service's answer: no early re-measurement.
    early = data.get("early_remeasure", False)
    if not isinstance(early, bool):
        raise ValueError(
            f"The 'early_remeasure' field must be true or false. Got {early!r} instead."
        )
    return TaskPrediction(
        jeditaskid=jedi_task_id,
        model_name=str(data.get("model_name", model.get("name", "?"))),
        model_version=str(data.get("model_version", model.get("version", "?"))),
        decision=data["decision"],
        reason=str(data.get("reason", "")),
        targets={n: _target_from_json(n, t) for n, t in raw_targets.items()},
        early_remeasure=early,
    )


class HttpClient:
    """Predict through the panda-predictor service, giving up after ``timeout`` s.

    Parameters
    ----------
    url:
        Base URL of the service, e.g. ``http://predictor.example:8080``.
    timeout:
        Total seconds for connect, request and response together.
    """

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(
                f"The 'url' field must be an http:// or https:// URL. Got {url!r} "
                "instead."
            )
        if not isinstance(timeout, int | float) or not timeout > 0:
            raise ValueError(
                f"The 'timeout' field must be a positive number of seconds. "
                f"Got {timeout!r} instead."
            )
        self.url = url.rstrip("/") + "/v1/predictions"
        self.timeout = float(timeout)

    def _post(self, body: bytes) -> bytes:
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return response.read(MAX_RESPONSE_BYTES)

    def _post_with_deadline(self, body: bytes) -> bytes:
        # urlopen's timeout bounds each socket operation, not the whole exchange; a
        # worker thread bounds the total so a trickling server cannot stall JEDI.
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["body"] = self._post(body)
            except BaseException as exc:  # noqa: BLE001  handed to the caller
                outcome["error"] = exc

        worker = threading.Thread(target=run, name="refiner-http", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise PredictionUnavailable(
                f"no answer from {self.url} within {self.timeout:g} s", "timeout"
            )
        if "error" in outcome:
            raise outcome["error"]
        return outcome["body"]

    def predict(self, definition: Mapping[str, Any]) -> TaskPrediction:
        """Return the service's prediction; raise PredictionUnavailable on failure."""
        task_id = int(definition.get("jediTaskID", 0))
        body = json.dumps(dict(definition), default=str).encode()
        try:
            payload = self._post_with_deadline(body)
        except urllib.error.HTTPError as exc:
            detail = exc.read(2000).decode(errors="replace")
            raise PredictionUnavailable(
                f"{self.url} answered {exc.code}: {detail}", f"http_{exc.code}"
            ) from exc
        except TimeoutError as exc:
            raise PredictionUnavailable(f"{self.url}: {exc}", "timeout") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise PredictionUnavailable(f"{self.url}: {exc}", "unreachable") from exc
        try:
            return prediction_from_json(json.loads(payload), task_id)
        except (ValueError, KeyError, TypeError) as exc:
            raise PredictionUnavailable(
                f"unexpected answer from {self.url}: {exc}", "bad_response"
            ) from exc


__all__ = ["MAX_RESPONSE_BYTES", "HttpClient", "prediction_from_json"]
