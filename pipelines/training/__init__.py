"""Fit one bundle from a labelled history: models, tail rules, combination, prices.

Belongs here: pure functions of the labelled history and the bins, and the report of
one training. Not here: the database-to-registry runs (:mod:`pipelines.retraining`).
"""
