-- panda-predictor's own tables: the audit of every prediction and the schema version.
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).
-- Later patches (0002_..., ...) add tables and bump the 'plugin' version row.
-- Oracle commits each DDL statement on its own; the version row comes last.

/* sql/oracle/plugin/0001_plugin_tables.sql */
CREATE TABLE {plugin_schema}pp_schema_version (
    component    VARCHAR2(32) NOT NULL,
    version      NUMBER(9) NOT NULL,
    applied_at   TIMESTAMP NOT NULL,
    description  CLOB,
    CONSTRAINT pp_schema_version_pk PRIMARY KEY (component)
);

/* sql/oracle/plugin/0001_plugin_tables.sql */
CREATE TABLE {plugin_schema}pp_prediction_audit (
    jeditaskid              NUMBER(11) NOT NULL,
    model_name              VARCHAR2(128) NOT NULL,
    model_version           VARCHAR2(64) NOT NULL,
    decision                VARCHAR2(16) NOT NULL,
    reason                  VARCHAR2(400),
    ramcount_class          NUMBER(5),
    ramcount_value          NUMBER(10),
    ramcount_unit           VARCHAR2(32),
    ramcount_confidence     BINARY_DOUBLE,
    ramcount_proba          VARCHAR2(400),
    cputime_class           NUMBER(5),
    cputime_value           NUMBER(10),
    cputime_unit            VARCHAR2(32),
    cputime_confidence      BINARY_DOUBLE,
    cputime_proba           VARCHAR2(400),
    iointensity_class       NUMBER(5),
    iointensity_value       NUMBER(10),
    iointensity_unit        VARCHAR2(32),
    iointensity_confidence  BINARY_DOUBLE,
    iointensity_proba       VARCHAR2(400),
    walltime_class          NUMBER(5),
    walltime_value          NUMBER(10),
    walltime_unit           VARCHAR2(32),
    walltime_confidence     BINARY_DOUBLE,
    walltime_proba          VARCHAR2(400),
    predicted_at            TIMESTAMP NOT NULL,
    written_at              TIMESTAMP,
    host                    VARCHAR2(128),
    CONSTRAINT pp_prediction_audit_pk PRIMARY KEY (jeditaskid)
);

/* sql/oracle/plugin/0001_plugin_tables.sql */
CREATE INDEX {plugin_schema}pp_prediction_audit_time_idx
    ON {plugin_schema}pp_prediction_audit (predicted_at);

/* sql/oracle/plugin/0001_plugin_tables.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'plugin' AS component, 1 AS version,
              '0001_plugin_tables: pp_prediction_audit, pp_schema_version' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
