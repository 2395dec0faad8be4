-- JEDI's own task lock (LOCKEDBY, LOCKEDTIME on JEDI_TASKS: the JEDI agent holding the
-- task) and the indexes the hook's incremental history read uses (tasks changed and
-- jobs finished since the last pass). Test and development databases only: a real
-- PanDA database already has these columns, and its DBA decides on the indexes.

/* sql/oracle/panda/0002_task_locks.sql */
ALTER TABLE {schema}jedi_tasks ADD (lockedby VARCHAR2(40), lockedtime DATE);

/* sql/oracle/panda/0002_task_locks.sql */
CREATE INDEX {schema}jedi_tasks_modtime_idx ON {schema}jedi_tasks (modificationtime) LOCAL;

/* sql/oracle/panda/0002_task_locks.sql */
CREATE INDEX {schema}jobsarchived4_endtime_idx ON {schema}jobsarchived4 (endtime) LOCAL;

/* sql/oracle/panda/0002_task_locks.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'panda' AS component, 2 AS version,
              '0002_task_locks: JEDI_TASKS.LOCKEDBY/LOCKEDTIME, change indexes' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
