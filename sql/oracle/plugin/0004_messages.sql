-- The scout_prediction message route (docs/scout-prediction-message.md).
-- pp_message_published: the hook's 'publish' output, one row per message the broker
-- acknowledged with a receipt (written only after the receipt).
-- pp_message_applied: JEDI's AIParameterAdjuster plugin, one row per message it
-- handled (applied, kept, refused or rejected), keyed by the message's idempotency
-- key, so a redelivered message changes nothing (deliveries counts the copies).
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).

/* sql/oracle/plugin/0004_messages.sql */
CREATE TABLE {plugin_schema}pp_message_published (
    idempotency_key  VARCHAR2(128) NOT NULL,
    jeditaskid       NUMBER(19) NOT NULL,
    decision         VARCHAR2(16) NOT NULL,
    model_name       VARCHAR2(128) NOT NULL,
    model_version    VARCHAR2(64) NOT NULL,
    destination      VARCHAR2(256) NOT NULL,
    receipt          VARCHAR2(64),
    published_at     TIMESTAMP NOT NULL,
    expires_at       TIMESTAMP NOT NULL,
    host             VARCHAR2(128),
    CONSTRAINT pp_message_published_pk PRIMARY KEY (idempotency_key)
);

/* sql/oracle/plugin/0004_messages.sql */
CREATE INDEX {plugin_schema}pp_message_published_task_idx
    ON {plugin_schema}pp_message_published (jeditaskid);

/* sql/oracle/plugin/0004_messages.sql */
CREATE TABLE {plugin_schema}pp_message_applied (
    idempotency_key  VARCHAR2(128) NOT NULL,
    jeditaskid       NUMBER(19),
    outcome          VARCHAR2(16) NOT NULL,
    reason           VARCHAR2(400),
    message_id       VARCHAR2(128),
    received_at      TIMESTAMP NOT NULL,
    deliveries       NUMBER(10) NOT NULL,
    host             VARCHAR2(128),
    CONSTRAINT pp_message_applied_pk PRIMARY KEY (idempotency_key)
);

/* sql/oracle/plugin/0004_messages.sql */
CREATE INDEX {plugin_schema}pp_message_applied_task_idx
    ON {plugin_schema}pp_message_applied (jeditaskid);

/* sql/oracle/plugin/0004_messages.sql */
MERGE INTO {plugin_schema}pp_schema_version v
USING (SELECT 'plugin' AS component, 4 AS version,
              '0004_messages: pp_message_published, pp_message_applied (scout_prediction messages)' AS description
       FROM dual) p
ON (v.component = p.component)
WHEN MATCHED THEN UPDATE
    SET v.version = p.version, v.applied_at = SYSTIMESTAMP, v.description = p.description
WHEN NOT MATCHED THEN INSERT (component, version, applied_at, description)
    VALUES (p.component, p.version, SYSTIMESTAMP, p.description);
