"""Honest evaluation on real job logs: trace features, walk-forward runs, replay."""
