"""The pure core: what a PanDA task is, what is learned from it, and how it is decided.

- ``domain/``: PanDA's vocabulary and rules (targets, units, SPLITRULE, resource type,
  requested values, memory steps, task checks) and the typed prediction every
  adapter exchanges;
- ``labels.py``, ``label_values.py``, ``bins.py``: what is learned, a task's four
  labels from its scout jobs (and their rounding and units as PanDA writes them) and
  the resource classes they fall in;
- ``features/``: a task's own fields, the history index of similar tasks, the
  feature pipeline;
- ``decide/``: from class probabilities to one decision (tail rule, calibration,
  recency rules and experts, use tables, expected cost, scout policy, rollout);
- ``assess/``: judging models and decisions (splits, scores, calibration errors,
  baselines, drift and its verdict, feedback, what-if, day bootstrap);
- ``replay/``: job logs re-run under PanDA's retry rules, with the published peers;
- ``fitted.py``, ``errors.py``, ``reason_text.py``, ``identity_cache.py``: shared by
  the folders (the not-fitted contract, the schema check, numbers printed in
  reasons, values kept while their sources are the same objects).

The models themselves live in :mod:`panda_predictor.models`. Nothing here touches a
database, HTTP, MLflow or files; the import-linter contracts in ``pyproject.toml``
enforce it, and keep these folders in layers: a folder above imports the ones below,
never the other way (docs/architecture.md, "Inside the core").
"""
