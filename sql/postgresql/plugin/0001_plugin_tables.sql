-- panda-predictor's own tables: the audit of every prediction and the schema version.
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).
-- Later patches (0002_..., ...) add tables and bump the 'plugin' version row.

/* sql/postgresql/plugin/0001_plugin_tables.sql */
CREATE TABLE IF NOT EXISTS {plugin_schema}pp_schema_version (
    component    VARCHAR(32) NOT NULL,
    version      INTEGER NOT NULL,
    applied_at   TIMESTAMP NOT NULL,
    description  TEXT,
    CONSTRAINT pp_schema_version_pk PRIMARY KEY (component)
);

/* sql/postgresql/plugin/0001_plugin_tables.sql */
CREATE TABLE IF NOT EXISTS {plugin_schema}pp_prediction_audit (
    jeditaskid              BIGINT NOT NULL,
    model_name              VARCHAR(128) NOT NULL,
    model_version           VARCHAR(64) NOT NULL,
    decision                VARCHAR(16) NOT NULL,
    reason                  VARCHAR(400),
    ramcount_class          SMALLINT,
    ramcount_value          INTEGER,
    ramcount_unit           VARCHAR(32),
    ramcount_confidence     DOUBLE PRECISION,
    ramcount_proba          VARCHAR(400),
    cputime_class           SMALLINT,
    cputime_value           INTEGER,
    cputime_unit            VARCHAR(32),
    cputime_confidence      DOUBLE PRECISION,
    cputime_proba           VARCHAR(400),
    iointensity_class       SMALLINT,
    iointensity_value       INTEGER,
    iointensity_unit        VARCHAR(32),
    iointensity_confidence  DOUBLE PRECISION,
    iointensity_proba       VARCHAR(400),
    walltime_class          SMALLINT,
    walltime_value          INTEGER,
    walltime_unit           VARCHAR(32),
    walltime_confidence     DOUBLE PRECISION,
    walltime_proba          VARCHAR(400),
    predicted_at            TIMESTAMP NOT NULL,
    written_at              TIMESTAMP,
    host                    VARCHAR(128),
    CONSTRAINT pp_prediction_audit_pk PRIMARY KEY (jeditaskid)
);

/* sql/postgresql/plugin/0001_plugin_tables.sql */
CREATE INDEX IF NOT EXISTS pp_prediction_audit_time_idx
    ON {plugin_schema}pp_prediction_audit (predicted_at);

/* sql/postgresql/plugin/0001_plugin_tables.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('plugin', 1, CURRENT_TIMESTAMP, '0001_plugin_tables: pp_prediction_audit, pp_schema_version')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
