"""Serving: a trained *bundle* (features, bins, four classifiers, decision rules) and
the :class:`Predictor` that turns task rows into :class:`TaskPrediction` records
(its parts: ``classified``, ``prediction_records``, ``combination``, ``decision``).

Not here: training (pipelines/), the rules themselves (core/), where the task rows
come from and where the decisions go (db/, hook/, http_api/, plugins/).
"""
