"""panda-predictor: predict a PanDA task's resources at submission, so scouts can go.

Here: the pure core (core/), the adapters (db/, models/, ingest/, messages/, ...) and
the programs that serve predictions (hook/, http_api/, plugins/, cli/). Not here: the
learning pipelines (pipelines/) and the MLflow adapter (model_registry/), beside it.
"""

__version__ = "0.1.0"
