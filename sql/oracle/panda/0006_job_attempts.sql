-- A job's attempt and its file's maxAttempt, as PanDA's JOBSARCHIVED4 and
-- JOBSARCHIVED hold them (ATTEMPTNR, MAXATTEMPT, NOT NULL DEFAULT 0 in PanDA's DDL):
-- a failed job whose attempt reached maxAttempt is lost for good (no retry
-- follows), so the early re-measurement counts it among a task's settled jobs
-- (panda_predictor/db/early_remeasure.py). Test and development databases only: a
-- real PanDA database already has them.

/* sql/oracle/panda/0006_job_attempts.sql */
ALTER TABLE {schema}jobsarchived4 ADD (attemptnr NUMBER(3) DEFAULT 0 NOT NULL, maxattempt NUMBER(3) DEFAULT 0 NOT NULL);

/* sql/oracle/panda/0006_job_attempts.sql */
ALTER TABLE {schema}jobsarchived ADD (attemptnr NUMBER(3) DEFAULT 0 NOT NULL, maxattempt NUMBER(3) DEFAULT 0 NOT NULL);

/* sql/oracle/panda/0006_job_attempts.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'panda' AS component, 6 AS version,
              '0006_job_attempts: JOBSARCHIVED4 and JOBSARCHIVED ATTEMPTNR, MAXATTEMPT' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
