-- Drift checks kept in the database, so retrain, drift, report and service need not
-- share a disk: one row per 'panda-predictor drift' run with its verdict, the model
-- version checked, per feature the PSI, its threshold and whether it can alarm, and
-- per target the feedback under-allocation (both as JSON text).
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).

/* sql/sqlite/plugin/0003_drift_runs.sql */
CREATE TABLE IF NOT EXISTS {plugin_schema}pp_drift_run (
    run_id            VARCHAR(32) NOT NULL,
    run_at            TIMESTAMP NOT NULL,
    verdict           VARCHAR(20) NOT NULL,
    model_name        VARCHAR(128),
    model_version     VARCHAR(64),
    window_start      TIMESTAMP,
    window_end        TIMESTAMP,
    n_tasks           INTEGER,
    n_outcomes        INTEGER,
    features          TEXT NOT NULL,
    under_allocation  TEXT NOT NULL,
    CONSTRAINT pp_drift_run_pk PRIMARY KEY (run_id)
);

/* sql/sqlite/plugin/0003_drift_runs.sql */
CREATE INDEX IF NOT EXISTS {plugin_schema}pp_drift_run_time_idx
    ON pp_drift_run (run_at);

/* sql/sqlite/plugin/0003_drift_runs.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('plugin', 3, CURRENT_TIMESTAMP, '0003_drift_runs: pp_drift_run (drift checks with verdict, per-feature PSI and under-allocation)')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
