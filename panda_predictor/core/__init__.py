"""The pure core: targets, labels, bins, features, models and decisions.

Nothing here touches a database, HTTP, MLflow or files; the import-linter contract in
``pyproject.toml`` enforces it.
"""
