-- Feedback loop: what each audited prediction met when its jobs ran.
-- One row per task of pp_prediction_audit whose jobs reached JOBSARCHIVED4: the
-- classes written, the truth (the scout formulas applied to the task's first finished
-- jobs) and the job outcomes (failures for lack of memory or time, unused requests).
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).
-- Oracle commits each DDL statement on its own; the version row comes last.

/* sql/oracle/plugin/0002_outcomes.sql */
CREATE TABLE {plugin_schema}pp_task_outcome (
    jeditaskid              NUMBER(11) NOT NULL,
    model_name              VARCHAR2(128) NOT NULL,
    model_version           VARCHAR2(64) NOT NULL,
    decision                VARCHAR2(16) NOT NULL,
    predicted_at            TIMESTAMP NOT NULL,
    first_job_at            TIMESTAMP,
    n_jobs                  NUMBER(10),
    n_finished              NUMBER(10),
    n_failed                NUMBER(10),
    n_failed_memory         NUMBER(10),
    n_failed_time           NUMBER(10),
    mem_requested_gbh       BINARY_DOUBLE,
    mem_used_gbh            BINARY_DOUBLE,
    wall_requested_h        BINARY_DOUBLE,
    wall_used_h             BINARY_DOUBLE,
    ramcount_pred_class     NUMBER(5),
    ramcount_true_class     NUMBER(5),
    ramcount_true_value     BINARY_DOUBLE,
    cputime_pred_class      NUMBER(5),
    cputime_true_class      NUMBER(5),
    cputime_true_value      BINARY_DOUBLE,
    iointensity_pred_class  NUMBER(5),
    iointensity_true_class  NUMBER(5),
    iointensity_true_value  BINARY_DOUBLE,
    walltime_pred_class     NUMBER(5),
    walltime_true_class     NUMBER(5),
    walltime_true_value     BINARY_DOUBLE,
    evaluated_at            TIMESTAMP NOT NULL,
    CONSTRAINT pp_task_outcome_pk PRIMARY KEY (jeditaskid)
);

/* sql/oracle/plugin/0002_outcomes.sql */
CREATE INDEX {plugin_schema}pp_task_outcome_time_idx
    ON {plugin_schema}pp_task_outcome (predicted_at);

/* sql/oracle/plugin/0002_outcomes.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'plugin' AS component, 2 AS version,
              '0002_outcomes: pp_task_outcome (feedback of predictions against job outcomes)' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
