-- JEDI's own task lock (LOCKEDBY, LOCKEDTIME on JEDI_TASKS: the JEDI agent holding the
-- task) and the indexes the hook's incremental history read uses (tasks changed and
-- jobs finished since the last pass). Test and development databases only: a real
-- PanDA database already has these columns, and its DBA decides on the indexes.

/* sql/postgresql/panda/0002_task_locks.sql */
ALTER TABLE {schema}jedi_tasks ADD COLUMN lockedby VARCHAR(40);

/* sql/postgresql/panda/0002_task_locks.sql */
ALTER TABLE {schema}jedi_tasks ADD COLUMN lockedtime TIMESTAMP;

/* sql/postgresql/panda/0002_task_locks.sql */
CREATE INDEX IF NOT EXISTS jedi_tasks_modtime_idx ON {schema}jedi_tasks (modificationtime);

/* sql/postgresql/panda/0002_task_locks.sql */
CREATE INDEX IF NOT EXISTS jobsarchived4_endtime_idx ON {schema}jobsarchived4 (endtime);

/* sql/postgresql/panda/0002_task_locks.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('panda', 2, CURRENT_TIMESTAMP, '0002_task_locks: JEDI_TASKS.LOCKEDBY/LOCKEDTIME, change indexes')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
