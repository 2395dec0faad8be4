-- PanDA's JEDI_TASKS, JEDI_DATASETS and JOBSARCHIVED4 (the subset panda-predictor
-- uses), for test and development databases only: on a real PanDA database these
-- tables belong to PanDA (schema ATLAS_PANDA) and this patch is never applied.
-- {schema} is replaced by the PanDA schema followed by a dot (or nothing),
-- {plugin_schema} likewise by the schema of the plugin's own tables.
-- Interval partitioning on jeditaskid: Oracle adds a partition per million task ids
-- as rows arrive, so every query must carry the task id for partition pruning.
-- Oracle commits each DDL statement on its own; the version row comes last, so a
-- patch that stopped half way is visible as not applied.

/* sql/oracle/panda/0001_panda_tables.sql */
CREATE TABLE {schema}jedi_tasks (
    jeditaskid        NUMBER(11) NOT NULL,
    taskname          VARCHAR2(256),
    status            VARCHAR2(64),
    username          VARCHAR2(128),
    creationdate      DATE,
    modificationtime  DATE,
    prodsourcelabel   VARCHAR2(20),
    workinggroup      VARCHAR2(32),
    vo                VARCHAR2(32),
    corecount         NUMBER(9),
    tasktype          VARCHAR2(64),
    processingtype    VARCHAR2(64),
    architecture      VARCHAR2(256),
    transuses         VARCHAR2(64),
    transhome         VARCHAR2(128),
    transpath         VARCHAR2(128),
    splitrule         VARCHAR2(200),
    walltime          NUMBER(10),
    walltimeunit      VARCHAR2(32),
    ramcount          NUMBER(10),
    ramunit           VARCHAR2(32),
    baseramcount      NUMBER(10),
    iointensity       NUMBER(10),
    iointensityunit   VARCHAR2(32),
    cputime           NUMBER(10),
    cputimeunit       VARCHAR2(32),
    cpuefficiency     NUMBER(3),
    basewalltime      NUMBER(10),
    outdiskcount      NUMBER(10),
    workdiskcount     NUMBER(10),
    campaign          VARCHAR2(32),
    gshare            VARCHAR2(32),
    resource_type     VARCHAR2(56),
    framework         VARCHAR2(50),
    diskio            NUMBER(10),
    memory_leak_core  NUMBER(18),
    CONSTRAINT jedi_tasks_pk PRIMARY KEY (jeditaskid)
)
PARTITION BY RANGE (jeditaskid) INTERVAL (1000000)
    (PARTITION jedi_tasks_p0 VALUES LESS THAN (1000000));

/* sql/oracle/panda/0001_panda_tables.sql */
CREATE INDEX {schema}jedi_tasks_status_idx ON {schema}jedi_tasks (status) LOCAL;

/* sql/oracle/panda/0001_panda_tables.sql */
CREATE TABLE {schema}jedi_datasets (
    jeditaskid   NUMBER(11) NOT NULL,
    datasetid    NUMBER(11) NOT NULL,
    datasetname  VARCHAR2(255),
    type         VARCHAR2(20),
    masterid     NUMBER(11),
    status       VARCHAR2(20),
    nfiles       NUMBER(10),
    nevents      NUMBER(18),
    CONSTRAINT jedi_datasets_pk PRIMARY KEY (jeditaskid, datasetid) USING INDEX LOCAL
)
PARTITION BY RANGE (jeditaskid) INTERVAL (1000000)
    (PARTITION jedi_datasets_p0 VALUES LESS THAN (1000000));

/* sql/oracle/panda/0001_panda_tables.sql */
CREATE INDEX {schema}jedi_datasets_task_type_idx
    ON {schema}jedi_datasets (jeditaskid, type) LOCAL;

/* sql/oracle/panda/0001_panda_tables.sql */
CREATE TABLE {schema}jobsarchived4 (
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
    CONSTRAINT jobsarchived4_pk PRIMARY KEY (pandaid, jeditaskid) USING INDEX LOCAL
)
PARTITION BY RANGE (jeditaskid) INTERVAL (1000000)
    (PARTITION jobsarchived4_p0 VALUES LESS THAN (1000000));

/* sql/oracle/panda/0001_panda_tables.sql */
CREATE INDEX {schema}jobsarchived4_task_idx ON {schema}jobsarchived4 (jeditaskid) LOCAL;

/* sql/oracle/panda/0001_panda_tables.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'panda' AS component, 1 AS version,
              '0001_panda_tables: JEDI_TASKS, JEDI_DATASETS, JOBSARCHIVED4' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
