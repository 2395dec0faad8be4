-- JEDI_DATASET_CONTENTS: one row per file of a task's dataset, with the job (PANDAID)
-- that last used it. getScoutJobData_JEDI takes a scout's events and input size from
-- its finished files of the master input (and pseudo_input) datasets; the labels do
-- the same where the table exists. Test and development databases only (the columns
-- the labels read); a real PanDA database has the full table.

/* sql/postgresql/panda/0004_dataset_contents.sql */
CREATE TABLE IF NOT EXISTS {schema}jedi_dataset_contents (
    jeditaskid          BIGINT NOT NULL,
    datasetid           BIGINT NOT NULL,
    fileid              BIGINT NOT NULL,
    type                VARCHAR(20) NOT NULL,
    status              VARCHAR(64) NOT NULL,
    fsize               BIGINT,
    nevents             BIGINT,
    startevent          BIGINT,
    endevent            BIGINT,
    pandaid             BIGINT,
    CONSTRAINT jedi_dataset_contents_pk PRIMARY KEY (jeditaskid, datasetid, fileid)
);

/* sql/postgresql/panda/0004_dataset_contents.sql */
CREATE INDEX IF NOT EXISTS jedi_dataset_contents_job_idx ON {schema}jedi_dataset_contents (jeditaskid, pandaid);

/* sql/postgresql/panda/0004_dataset_contents.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('panda', 4, CURRENT_TIMESTAMP, '0004_dataset_contents: JEDI_DATASET_CONTENTS (the columns the labels read)')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
