-- Drift checks kept in the database, so retrain, drift, report and service need not
-- share a disk: one row per 'panda-predictor drift' run with its verdict, the model
-- version checked, per feature the PSI, its threshold and whether it can alarm, and
-- per target the feedback under-allocation (both as JSON text).
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).
-- Oracle commits each DDL statement on its own; the version row comes last.

/* sql/oracle/plugin/0003_drift_runs.sql */
CREATE TABLE {plugin_schema}pp_drift_run (
    run_id            VARCHAR2(32) NOT NULL,
    run_at            TIMESTAMP NOT NULL,
    verdict           VARCHAR2(20) NOT NULL,
    model_name        VARCHAR2(128),
    model_version     VARCHAR2(64),
    window_start      TIMESTAMP,
    window_end        TIMESTAMP,
    n_tasks           NUMBER(10),
    n_outcomes        NUMBER(10),
    features          CLOB NOT NULL,
    under_allocation  CLOB NOT NULL,
    CONSTRAINT pp_drift_run_pk PRIMARY KEY (run_id)
);

/* sql/oracle/plugin/0003_drift_runs.sql */
CREATE INDEX {plugin_schema}pp_drift_run_time_idx
    ON {plugin_schema}pp_drift_run (run_at);

/* sql/oracle/plugin/0003_drift_runs.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'plugin' AS component, 3 AS version,
              '0003_drift_runs: pp_drift_run (drift checks with verdict, per-feature PSI and under-allocation)' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
