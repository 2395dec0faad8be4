-- PanDA's job archive, ATLAS_PANDAARCH.JOBSARCHIVED (pg_PANDAARCH_TABLE.sql in PanDA's
-- DDL): the jobs JOBSARCHIVED4 hands on after some days. getScoutJobData_JEDI reads
-- jobsArchived4 UNION jobsArchived; the labels read both where the archive exists.
-- Test and development databases only, created beside JOBSARCHIVED4 (point the
-- setting db_archive_schema at its schema); a real PanDA database has its own.

/* sql/oracle/panda/0003_jobs_archive.sql */
CREATE TABLE {schema}jobsarchived (
    pandaid             NUMBER(11) NOT NULL,
    jeditaskid          NUMBER(11) NOT NULL,
    jobstatus           VARCHAR2(15),
    prodsourcelabel     VARCHAR2(20),
    processingtype      VARCHAR2(64),
    transformation      VARCHAR2(250),
    computingsite       VARCHAR2(128),
    specialhandling     VARCHAR2(80),
    corecount           NUMBER(5),
    actualcorecount     NUMBER(9),
    nevents             NUMBER(18),
    starttime           DATE,
    endtime             DATE,
    cpuconsumptiontime  NUMBER(20),
    maxpss              NUMBER(18),
    maxrss              NUMBER(18),
    maxvmem             NUMBER(18),
    inputfilebytes      NUMBER(18),
    outputfilebytes     NUMBER(18),
    hs06sec             NUMBER(18),
    totrbytes           NUMBER(18),
    totwbytes           NUMBER(18),
    minramcount         NUMBER(18),
    maxwalltime         NUMBER(18),
    jobmetrics          VARCHAR2(500),
    modificationtime    DATE,
    CONSTRAINT jobsarchived_pk PRIMARY KEY (pandaid)
);

/* sql/oracle/panda/0003_jobs_archive.sql */
CREATE INDEX {schema}jobsarchived_task_idx ON {schema}jobsarchived (jeditaskid);

/* sql/oracle/panda/0003_jobs_archive.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'panda' AS component, 3 AS version,
              '0003_jobs_archive: JOBSARCHIVED (PanDA''s job archive)' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
