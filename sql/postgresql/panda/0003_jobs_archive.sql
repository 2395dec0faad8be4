-- PanDA's job archive, ATLAS_PANDAARCH.JOBSARCHIVED (pg_PANDAARCH_TABLE.sql in PanDA's
-- DDL): the jobs JOBSARCHIVED4 hands on after some days. getScoutJobData_JEDI reads
-- jobsArchived4 UNION jobsArchived; the labels read both where the archive exists.
-- Test and development databases only, created beside JOBSARCHIVED4 (point the
-- setting db_archive_schema at its schema); a real PanDA database has its own.

/* sql/postgresql/panda/0003_jobs_archive.sql */
CREATE TABLE IF NOT EXISTS {schema}jobsarchived (
    pandaid             BIGINT NOT NULL,
    jeditaskid          BIGINT NOT NULL,
    jobstatus           VARCHAR(15),
    prodsourcelabel     VARCHAR(20),
    processingtype      VARCHAR(64),
    transformation      VARCHAR(250),
    computingsite       VARCHAR(128),
    specialhandling     VARCHAR(80),
    corecount           SMALLINT,
    actualcorecount     INTEGER,
    nevents             BIGINT,
    starttime           TIMESTAMP,
    endtime             TIMESTAMP,
    cpuconsumptiontime  NUMERIC(20),
    maxpss              BIGINT,
    maxrss              BIGINT,
    maxvmem             BIGINT,
    inputfilebytes      BIGINT,
    outputfilebytes     BIGINT,
    hs06sec             BIGINT,
    totrbytes           BIGINT,
    totwbytes           BIGINT,
    minramcount         BIGINT,
    maxwalltime         BIGINT,
    jobmetrics          VARCHAR(500),
    modificationtime    TIMESTAMP,
    CONSTRAINT jobsarchived_pk PRIMARY KEY (pandaid)
);

/* sql/postgresql/panda/0003_jobs_archive.sql */
CREATE INDEX IF NOT EXISTS jobsarchived_task_idx ON {schema}jobsarchived (jeditaskid);

/* sql/postgresql/panda/0003_jobs_archive.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('panda', 3, CURRENT_TIMESTAMP, '0003_jobs_archive: JOBSARCHIVED (PanDA''s job archive)')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
