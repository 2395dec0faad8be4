"""Scout labels of the whole history: computed from job records, stored in Parquet.

Belongs here: the runners that label a database (Python or SQL) or Parquet exports
(Spark). Not here: the label formulas themselves (:mod:`panda_predictor.core.labels`).
"""
