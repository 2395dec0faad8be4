"""The SQL adapter (SQLAlchemy Core): PanDA's tables and the plugin's own.

Here: the table descriptions, the hook's queries and write-back, labels in SQL, the
audit, outcomes and migrations. Not here: the DDL (sql/), what a value means (core/),
when to write (hook/, pipelines/).
"""
