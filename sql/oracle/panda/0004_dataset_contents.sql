-- JEDI_DATASET_CONTENTS: one row per file of a task's dataset, with the job (PANDAID)
-- that last used it. getScoutJobData_JEDI takes a scout's events and input size from
-- its finished files of the master input (and pseudo_input) datasets; the labels do
-- the same where the table exists. Test and development databases only (the columns
-- the labels read); a real PanDA database has the full table.

/* sql/oracle/panda/0004_dataset_contents.sql */
CREATE TABLE {schema}jedi_dataset_contents (
    jeditaskid          NUMBER(11) NOT NULL,
    datasetid           NUMBER(11) NOT NULL,
    fileid              NUMBER(11) NOT NULL,
    type                VARCHAR2(20) NOT NULL,
    status              VARCHAR2(64) NOT NULL,
    fsize               NUMBER(18),
    nevents             NUMBER(18),
    startevent          NUMBER(18),
    endevent            NUMBER(18),
    pandaid             NUMBER(11),
    CONSTRAINT jedi_dataset_contents_pk PRIMARY KEY (jeditaskid, datasetid, fileid)
);

/* sql/oracle/panda/0004_dataset_contents.sql */
CREATE INDEX {schema}jedi_dataset_contents_job_idx ON {schema}jedi_dataset_contents (jeditaskid, pandaid);

/* sql/oracle/panda/0004_dataset_contents.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'panda' AS component, 4 AS version,
              '0004_dataset_contents: JEDI_DATASET_CONTENTS (the columns the labels read)' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
