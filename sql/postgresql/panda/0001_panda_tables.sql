-- PanDA's JEDI_TASKS, JEDI_DATASETS and JOBSARCHIVED4 (the subset panda-predictor
-- uses), for test and development databases only: on a real PanDA database these
-- tables belong to PanDA and this patch is never applied.
-- {schema} is replaced by the PanDA schema followed by a dot (or nothing),
-- {plugin_schema} likewise by the schema of the plugin's own tables.
-- Partitioned by RANGE (jeditaskid) like PanDA's, so every query must carry the task id.

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_tasks (
    jeditaskid        BIGINT NOT NULL,
    taskname          VARCHAR(256),
    status            VARCHAR(64),
    username          VARCHAR(128),
    creationdate      TIMESTAMP,
    modificationtime  TIMESTAMP,
    prodsourcelabel   VARCHAR(20),
    workinggroup      VARCHAR(32),
    vo                VARCHAR(32),
    corecount         INTEGER,
    tasktype          VARCHAR(64),
    processingtype    VARCHAR(64),
    architecture      VARCHAR(256),
    transuses         VARCHAR(64),
    transhome         VARCHAR(128),
    transpath         VARCHAR(128),
    splitrule         VARCHAR(200),
    walltime          INTEGER,
    walltimeunit      VARCHAR(32),
    ramcount          INTEGER,
    ramunit           VARCHAR(32),
    baseramcount      INTEGER,
    iointensity       INTEGER,
    iointensityunit   VARCHAR(32),
    cputime           INTEGER,
    cputimeunit       VARCHAR(32),
    cpuefficiency     SMALLINT,
    basewalltime      INTEGER,
    outdiskcount      INTEGER,
    workdiskcount     INTEGER,
    campaign          VARCHAR(32),
    gshare            VARCHAR(32),
    resource_type     VARCHAR(56),
    framework         VARCHAR(50),
    diskio            INTEGER,
    memory_leak_core  BIGINT,
    CONSTRAINT jedi_tasks_pk PRIMARY KEY (jeditaskid)
) PARTITION BY RANGE (jeditaskid);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_tasks_p0 PARTITION OF {schema}jedi_tasks
    FOR VALUES FROM (MINVALUE) TO (10000000);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_tasks_p1 PARTITION OF {schema}jedi_tasks
    FOR VALUES FROM (10000000) TO (50000000);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_tasks_pdef PARTITION OF {schema}jedi_tasks
    DEFAULT;

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE INDEX IF NOT EXISTS jedi_tasks_status_idx ON {schema}jedi_tasks (status);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_datasets (
    jeditaskid   BIGINT NOT NULL,
    datasetid    BIGINT NOT NULL,
    datasetname  VARCHAR(255),
    type         VARCHAR(20),
    masterid     BIGINT,
    status       VARCHAR(20),
    nfiles       BIGINT,
    nevents      BIGINT,
    CONSTRAINT jedi_datasets_pk PRIMARY KEY (jeditaskid, datasetid)
) PARTITION BY RANGE (jeditaskid);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_datasets_p0 PARTITION OF {schema}jedi_datasets
    FOR VALUES FROM (MINVALUE) TO (10000000);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_datasets_p1 PARTITION OF {schema}jedi_datasets
    FOR VALUES FROM (10000000) TO (50000000);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_datasets_pdef PARTITION OF {schema}jedi_datasets
    DEFAULT;

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE INDEX IF NOT EXISTS jedi_datasets_task_type_idx
    ON {schema}jedi_datasets (jeditaskid, type);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jobsarchived4 (
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
    CONSTRAINT jobsarchived4_pk PRIMARY KEY (pandaid, jeditaskid)
) PARTITION BY RANGE (jeditaskid);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jobsarchived4_p0 PARTITION OF {schema}jobsarchived4
    FOR VALUES FROM (MINVALUE) TO (10000000);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jobsarchived4_p1 PARTITION OF {schema}jobsarchived4
    FOR VALUES FROM (10000000) TO (50000000);

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE TABLE IF NOT EXISTS {schema}jobsarchived4_pdef PARTITION OF {schema}jobsarchived4
    DEFAULT;

/* sql/postgresql/panda/0001_panda_tables.sql */
CREATE INDEX IF NOT EXISTS jobsarchived4_task_idx ON {schema}jobsarchived4 (jeditaskid);

/* sql/postgresql/panda/0001_panda_tables.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('panda', 1, CURRENT_TIMESTAMP, '0001_panda_tables: JEDI_TASKS, JEDI_DATASETS, JOBSARCHIVED4')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
