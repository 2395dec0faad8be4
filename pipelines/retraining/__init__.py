"""Runs that end in the model registry: train and register, gate, retrain on cadence.

Belongs here: the wiring of training to the database, MLflow and the champion gate.
Not here: how a model is fitted (:mod:`pipelines.training`) or watched (monitoring).
"""
