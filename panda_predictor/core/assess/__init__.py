"""Judging models and decisions on seen data: splits, scores, calibration errors,
baselines, drift and its verdict, feedback, what-if, day bootstrap. Re-running jobs
under a strategy is replay/."""
