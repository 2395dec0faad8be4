-- The scout_prediction message route (docs/scout-prediction-message.md).
-- pp_message_published: the hook's 'publish' output, one row per message the broker
-- acknowledged with a receipt (written only after the receipt).
-- pp_message_applied: JEDI's AIParameterAdjuster plugin, one row per message it
-- handled (applied, kept, refused or rejected), keyed by the message's idempotency
-- key, so a redelivered message changes nothing (deliveries counts the copies).
-- {plugin_schema} is replaced by the plugin's schema followed by a dot (or nothing).

/* sql/sqlite/plugin/0004_messages.sql */
CREATE TABLE IF NOT EXISTS {plugin_schema}pp_message_published (
    idempotency_key  VARCHAR(128) NOT NULL,
    jeditaskid       BIGINT NOT NULL,
    decision         VARCHAR(16) NOT NULL,
    model_name       VARCHAR(128) NOT NULL,
    model_version    VARCHAR(64) NOT NULL,
    destination      VARCHAR(256) NOT NULL,
    receipt          VARCHAR(64),
    published_at     TIMESTAMP NOT NULL,
    expires_at       TIMESTAMP NOT NULL,
    host             VARCHAR(128),
    CONSTRAINT pp_message_published_pk PRIMARY KEY (idempotency_key)
);

/* sql/sqlite/plugin/0004_messages.sql */
CREATE INDEX IF NOT EXISTS {plugin_schema}pp_message_published_task_idx
    ON pp_message_published (jeditaskid);

/* sql/sqlite/plugin/0004_messages.sql */
CREATE TABLE IF NOT EXISTS {plugin_schema}pp_message_applied (
    idempotency_key  VARCHAR(128) NOT NULL,
    jeditaskid       BIGINT,
    outcome          VARCHAR(16) NOT NULL,
    reason           VARCHAR(400),
    message_id       VARCHAR(128),
    received_at      TIMESTAMP NOT NULL,
    deliveries       INTEGER NOT NULL,
    host             VARCHAR(128),
    CONSTRAINT pp_message_applied_pk PRIMARY KEY (idempotency_key)
);

/* sql/sqlite/plugin/0004_messages.sql */
CREATE INDEX IF NOT EXISTS {plugin_schema}pp_message_applied_task_idx
    ON pp_message_applied (jeditaskid);

/* sql/sqlite/plugin/0004_messages.sql */
INSERT INTO {plugin_schema}pp_schema_version (component, version, applied_at, description)
VALUES ('plugin', 4, CURRENT_TIMESTAMP, '0004_messages: pp_message_published, pp_message_applied (scout_prediction messages)')
ON CONFLICT (component) DO UPDATE
    SET version = EXCLUDED.version,
        applied_at = EXCLUDED.applied_at,
        description = EXCLUDED.description;
