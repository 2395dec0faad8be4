-- A job's attempt and its file's maxAttempt, as PanDA's JOBSARCHIVED4 and
-- JOBSARCHIVED hold them (ATTEMPTNR, MAXATTEMPT, NOT NULL DEFAULT 0 in PanDA's DDL):
-- a failed job whose attempt reached maxAttempt is lost for good (no retry
-- follows), so the early re-measurement counts it among a task's settled jobs
-- (panda_predictor/db/early_remeasure.py). Test and development databases only: a
-- real PanDA database already has them.

/* sql/postgresql/panda/0006_job_attempts.sql */
ALTER TABLE {schema}jobsarchived4 ADD COLUMN attemptnr SMALLINT NOT NULL DEFAULT 0;

/* sql/postgresql/panda/0006_job_attempts.sql */
ALTER TABLE {schema}jobsarchived4 ADD COLUMN maxattempt SMALLINT NOT NULL DEFAULT 0;

/* sql/postgresql/panda/0006_job_attempts.sql */
ALTER TABLE {schema}jobsarchived ADD COLUMN attemptnr SMALLINT NOT NULL DEFAULT 0;

/* sql/postgresql/panda/0006_job_attempts.sql */
ALTER TABLE {schema}jobsarchived ADD COLUMN maxattempt SMALLINT NOT NULL DEFAULT 0;

/* sql/postgresql/panda/0006_job_attempts.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('panda', 6, CURRENT_TIMESTAMP, '0006_job_attempts: JOBSARCHIVED4 and JOBSARCHIVED ATTEMPTNR, MAXATTEMPT')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
