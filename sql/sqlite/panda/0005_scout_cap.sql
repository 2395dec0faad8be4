-- What the write-back touches besides JEDI_TASKS, and what PanDA's real DDL requires:
-- the master dataset's NFILESTOBEUSED (JEDI caps it at the scout chunks, the
-- write-back lifts the cap as JEDI's scouting branch does), the NOT NULL timestamps of
-- JEDI_DATASETS and JOBSARCHIVED4, JEDI_DATASET_CONTENTS (the file statuses JEDI counts
-- when it lifts the cap) and RESOURCE_TYPES (the resource type PanDA resets
-- after a ramCount change), with ATLAS's four resource types. Test and development
-- databases only: a real PanDA database already has them.

/* sql/sqlite/panda/0005_scout_cap.sql */
ALTER TABLE {schema}jedi_datasets ADD COLUMN creationtime TIMESTAMP;

/* sql/sqlite/panda/0005_scout_cap.sql */
ALTER TABLE {schema}jedi_datasets ADD COLUMN modificationtime TIMESTAMP;

/* sql/sqlite/panda/0005_scout_cap.sql */
ALTER TABLE {schema}jedi_datasets ADD COLUMN nfilestobeused BIGINT;

/* sql/sqlite/panda/0005_scout_cap.sql */
ALTER TABLE {schema}jedi_datasets ADD COLUMN nfilesused BIGINT;

/* sql/sqlite/panda/0005_scout_cap.sql */
ALTER TABLE {schema}jobsarchived4 ADD COLUMN modificationtime TIMESTAMP;

/* sql/sqlite/panda/0005_scout_cap.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_dataset_contents (
    jeditaskid  BIGINT NOT NULL,
    datasetid   BIGINT NOT NULL,
    fileid      BIGINT NOT NULL,
    status      VARCHAR(64) NOT NULL,
    CONSTRAINT jedi_dataset_contents_pk PRIMARY KEY (jeditaskid, datasetid, fileid)
);

/* sql/sqlite/panda/0005_scout_cap.sql */
CREATE TABLE IF NOT EXISTS {schema}resource_types (
    resource_name  VARCHAR(56) NOT NULL,
    mincore        INTEGER,
    maxcore        INTEGER,
    minrampercore  INTEGER,
    maxrampercore  INTEGER
);

/* sql/sqlite/panda/0005_scout_cap.sql */
INSERT INTO {schema}resource_types (resource_name, mincore, maxcore, minrampercore, maxrampercore)
VALUES ('SCORE', 1, 1, NULL, 2000);

/* sql/sqlite/panda/0005_scout_cap.sql */
INSERT INTO {schema}resource_types (resource_name, mincore, maxcore, minrampercore, maxrampercore)
VALUES ('SCORE_HIMEM', 1, 1, 2001, NULL);

/* sql/sqlite/panda/0005_scout_cap.sql */
INSERT INTO {schema}resource_types (resource_name, mincore, maxcore, minrampercore, maxrampercore)
VALUES ('MCORE', 2, NULL, NULL, 2000);

/* sql/sqlite/panda/0005_scout_cap.sql */
INSERT INTO {schema}resource_types (resource_name, mincore, maxcore, minrampercore, maxrampercore)
VALUES ('MCORE_HIMEM', 2, NULL, 2001, NULL);

/* sql/sqlite/panda/0005_scout_cap.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('panda', 5, CURRENT_TIMESTAMP, '0005_scout_cap: JEDI_DATASETS NFILESTOBEUSED and timestamps, RESOURCE_TYPES')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
