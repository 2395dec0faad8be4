-- What the write-back touches besides JEDI_TASKS, and what PanDA's real DDL requires:
-- the master dataset's NFILESTOBEUSED (JEDI caps it at the scout chunks, the
-- write-back lifts the cap as JEDI's scouting branch does), the NOT NULL timestamps of
-- JEDI_DATASETS and JOBSARCHIVED4, JEDI_DATASET_CONTENTS (the file statuses JEDI counts
-- when it lifts the cap) and RESOURCE_TYPES (the resource type PanDA resets
-- after a ramCount change), with ATLAS's four resource types. Test and development
-- databases only: a real PanDA database already has them.

/* sql/oracle/panda/0005_scout_cap.sql */
ALTER TABLE {schema}jedi_datasets ADD (creationtime DATE, modificationtime DATE, nfilestobeused NUMBER(10), nfilesused NUMBER(10));

/* sql/oracle/panda/0005_scout_cap.sql */
ALTER TABLE {schema}jobsarchived4 ADD (modificationtime DATE);

/* sql/oracle/panda/0005_scout_cap.sql */
CREATE TABLE {schema}jedi_dataset_contents (
    jeditaskid  NUMBER(11) NOT NULL,
    datasetid   NUMBER(11) NOT NULL,
    fileid      NUMBER(11) NOT NULL,
    status      VARCHAR2(64) NOT NULL,
    CONSTRAINT jedi_dataset_contents_pk PRIMARY KEY (jeditaskid, datasetid, fileid)
);

/* sql/oracle/panda/0005_scout_cap.sql */
CREATE TABLE {schema}resource_types (
    resource_name  VARCHAR2(56) NOT NULL,
    mincore        NUMBER(5),
    maxcore        NUMBER(5),
    minrampercore  NUMBER(10),
    maxrampercore  NUMBER(10)
);

/* sql/oracle/panda/0005_scout_cap.sql */
INSERT INTO {schema}resource_types (resource_name, mincore, maxcore, minrampercore, maxrampercore)
VALUES ('SCORE', 1, 1, NULL, 2000);

/* sql/oracle/panda/0005_scout_cap.sql */
INSERT INTO {schema}resource_types (resource_name, mincore, maxcore, minrampercore, maxrampercore)
VALUES ('SCORE_HIMEM', 1, 1, 2001, NULL);

/* sql/oracle/panda/0005_scout_cap.sql */
INSERT INTO {schema}resource_types (resource_name, mincore, maxcore, minrampercore, maxrampercore)
VALUES ('MCORE', 2, NULL, NULL, 2000);

/* sql/oracle/panda/0005_scout_cap.sql */
INSERT INTO {schema}resource_types (resource_name, mincore, maxcore, minrampercore, maxrampercore)
VALUES ('MCORE_HIMEM', 2, NULL, 2001, NULL);

/* sql/oracle/panda/0005_scout_cap.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'panda' AS component, 5 AS version,
              '0005_scout_cap: JEDI_DATASETS NFILESTOBEUSED and timestamps, RESOURCE_TYPES' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
