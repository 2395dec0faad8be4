"""Judging models and decisions on seen data: splits, scores, baselines, drift,
feedback, what-if, day bootstrap. Re-running jobs under a strategy is replay/."""
