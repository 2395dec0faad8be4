"""Honest evaluation on real job logs: walk-forward driver, scoring, replay, report."""
