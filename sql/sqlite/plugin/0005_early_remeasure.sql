-- The early re-measurement (panda_predictor/db/early_remeasure.py, docs/decisions.md):
-- one row per task written the scouts' own first values (marked_at, by the writer),
-- asked once to be re-measured by PanDA after its first finished jobs (asked_at:
-- WALLTIMEUNIT set to NULL, as PanDA's requestTaskParameterRecalculation does; PanDA's
-- watchdog sets the unit back when it has re-measured).
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).

/* sql/sqlite/plugin/0005_early_remeasure.sql */
CREATE TABLE IF NOT EXISTS {plugin_schema}pp_early_remeasure (
    jeditaskid     BIGINT NOT NULL,
    marked_at      TIMESTAMP NOT NULL,
    asked_at       TIMESTAMP,
    finished_jobs  INTEGER,
    host           VARCHAR(128),
    CONSTRAINT pp_early_remeasure_pk PRIMARY KEY (jeditaskid)
);

/* sql/sqlite/plugin/0005_early_remeasure.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('plugin', 5, CURRENT_TIMESTAMP, '0005_early_remeasure: pp_early_remeasure (tasks to re-measure after their first finished jobs)')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
