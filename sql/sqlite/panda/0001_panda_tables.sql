-- PanDA's JEDI_TASKS, JEDI_DATASETS and JOBSARCHIVED4 (the subset panda-predictor
-- uses), for test and development databases only: on a real PanDA database these
-- tables belong to PanDA and this patch is never applied.
-- {schema} is replaced by the PanDA schema followed by a dot (or nothing),
-- {plugin_schema} likewise by the schema of the plugin's own tables.
-- SQLite has no partitions; the queries still carry the task id.

/* sql/sqlite/panda/0001_panda_tables.sql */
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
);

/* sql/sqlite/panda/0001_panda_tables.sql */
CREATE INDEX IF NOT EXISTS {schema}jedi_tasks_status_idx ON jedi_tasks (status);

/* sql/sqlite/panda/0001_panda_tables.sql */
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
);

/* sql/sqlite/panda/0001_panda_tables.sql */
CREATE INDEX IF NOT EXISTS {schema}jedi_datasets_task_type_idx
    ON jedi_datasets (jeditaskid, type);

/* sql/sqlite/panda/0001_panda_tables.sql */
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
    CONSTRAINT jobsarchived4_pk PRIMARY KEY (pandaid)
);

/* sql/sqlite/panda/0001_panda_tables.sql */
CREATE INDEX IF NOT EXISTS {schema}jobsarchived4_task_idx ON jobsarchived4 (jeditaskid);

/* sql/sqlite/panda/0001_panda_tables.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('panda', 1, CURRENT_TIMESTAMP, '0001_panda_tables: JEDI_TASKS, JEDI_DATASETS, JOBSARCHIVED4')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
