-- The early re-measurement (panda_predictor/db/early_remeasure.py, docs/decisions.md):
-- one row per task written the scouts' own first values (marked_at, by the writer),
-- asked once to be re-measured by PanDA after its first finished jobs (asked_at:
-- WALLTIMEUNIT set to NULL, as PanDA's requestTaskParameterRecalculation does; PanDA's
-- watchdog sets the unit back when it has re-measured).
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).

/* sql/oracle/plugin/0005_early_remeasure.sql */
CREATE TABLE {plugin_schema}pp_early_remeasure (
    jeditaskid     NUMBER(19) NOT NULL,
    marked_at      TIMESTAMP NOT NULL,
    asked_at       TIMESTAMP,
    finished_jobs  NUMBER(10),
    host           VARCHAR2(128),
    CONSTRAINT pp_early_remeasure_pk PRIMARY KEY (jeditaskid)
);

/* sql/oracle/plugin/0005_early_remeasure.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'plugin' AS component, 5 AS version,
              '0005_early_remeasure: pp_early_remeasure (tasks to re-measure after their first finished jobs)' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
