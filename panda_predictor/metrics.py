"""Prometheus metrics shared by the hooks and the HTTP service."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

TASKS = Counter(
    "panda_predictor_tasks_total",
    "Tasks handled by a hook, by decision.",
    ["hook", "decision"],
)
FALLBACKS = Counter(
    "panda_predictor_fallbacks_total",
    "Times a hook failed open (task left untouched, scouts run), by reason.",
    ["hook", "reason"],
)
MODEL_VERSION = Gauge(
    "panda_predictor_model_version",
    "Version of the champion model in use.",
    ["model_name"],
)
