"""Honest figures: walk forward through a history, replay jobs, score against baselines.

Belongs here: the one walk-forward driver and its two data sources (the labelled
history in the database, real job logs), replays and their reports. Not here: the
training itself (:mod:`pipelines.training`); nothing here writes to the registry.
"""
