"""Copy PanDA's history tables out of the database into Parquet, month by month.

For sites without an HDFS import of JEDI_TASKS and JOBSARCHIVED4 (ATLAS analytics has
one): the Spark label engine (:mod:`pipelines.labels.spark`) reads what this writes.
Not here: labelling or any change to the exported rows.
"""

from pipelines.export.parquet import ExportMismatch, ExportSummary, export_history

__all__ = ["ExportMismatch", "ExportSummary", "export_history"]
