"""Probabilities to a decision: tail rule, calibration, experts, cost, policy, rollout.
What serving applies to a task; scoring it afterwards is assess/ and replay/."""
