-- Feedback loop: what each audited prediction met when its jobs ran.
-- One row per task of pp_prediction_audit whose jobs reached JOBSARCHIVED4: the
-- classes written, the truth (the scout formulas applied to the task's first finished
-- jobs) and the job outcomes (failures for lack of memory or time, unused requests).
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).

/* sql/sqlite/plugin/0002_outcomes.sql */
CREATE TABLE IF NOT EXISTS {plugin_schema}pp_task_outcome (
    jeditaskid              BIGINT NOT NULL,
    model_name              VARCHAR(128) NOT NULL,
    model_version           VARCHAR(64) NOT NULL,
    decision                VARCHAR(16) NOT NULL,
    predicted_at            TIMESTAMP NOT NULL,
    first_job_at            TIMESTAMP,
    n_jobs                  INTEGER,
    n_finished              INTEGER,
    n_failed                INTEGER,
    n_failed_memory         INTEGER,
    n_failed_time           INTEGER,
    mem_requested_gbh       REAL,
    mem_used_gbh            REAL,
    wall_requested_h        REAL,
    wall_used_h             REAL,
    ramcount_pred_class     SMALLINT,
    ramcount_true_class     SMALLINT,
    ramcount_true_value     REAL,
    cputime_pred_class      SMALLINT,
    cputime_true_class      SMALLINT,
    cputime_true_value      REAL,
    iointensity_pred_class  SMALLINT,
    iointensity_true_class  SMALLINT,
    iointensity_true_value  REAL,
    walltime_pred_class     SMALLINT,
    walltime_true_class     SMALLINT,
    walltime_true_value     REAL,
    evaluated_at            TIMESTAMP NOT NULL,
    CONSTRAINT pp_task_outcome_pk PRIMARY KEY (jeditaskid)
);

/* sql/sqlite/plugin/0002_outcomes.sql */
CREATE INDEX IF NOT EXISTS {plugin_schema}pp_task_outcome_time_idx
    ON pp_task_outcome (predicted_at);

/* sql/sqlite/plugin/0002_outcomes.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('plugin', 2, CURRENT_TIMESTAMP, '0002_outcomes: pp_task_outcome (feedback of predictions against job outcomes)')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
