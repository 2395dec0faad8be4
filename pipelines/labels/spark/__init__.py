"""Scout labels on Apache Spark, for histories too big for one process.

Reads the Parquet layout of :mod:`pipelines.export` (or ATLAS analytics' HDFS copy
of the same tables), applies the scout formulas of :mod:`panda_predictor.core.labels`
per job and per task on the cluster, and brings back one row of aggregates per task,
which :func:`~panda_predictor.core.label_values.finalize_labels` turns into labels
exactly as the Python path does. Needs the ``[spark]`` extra (pyspark). Not here:
storing the labels (:mod:`pipelines.labels.build`) or reading a database.
"""

from pipelines.labels.spark.engine import spark_labels
from pipelines.labels.spark.session import running_session, spark_session

__all__ = ["running_session", "spark_labels", "spark_session"]
