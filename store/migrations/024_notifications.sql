-- Vigil schema, version 24: webhooks, a DAG's notify list, the
-- notification outbox and SLA deadlines (docs/notifications.md,
-- adr/0032-notification-outbox-triggers.md).
--
-- A webhook's secret is stored only sealed by package secrets (as the
-- secrets table), under the name "webhook/NAME" and secret_version.
CREATE TABLE webhooks (
    name           text PRIMARY KEY,
    url            text        NOT NULL,
    format         text        NOT NULL CHECK (format IN ('json', 'slack')),
    secret_version bigint      NOT NULL DEFAULT 0,
    sealed_secret  bytea,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((secret_version = 0) = (sealed_secret IS NULL))
);

-- A DAG's notify list, one row per (event, webhook), rewritten by every
-- apply. A webhook a DAG names cannot be deleted (the foreign key).
CREATE TABLE dag_notify (
    dag_id  text NOT NULL REFERENCES dags (dag_id) ON DELETE CASCADE,
    event   text NOT NULL CHECK (event IN ('run_failed', 'run_succeeded', 'task_failed', 'task_retried', 'sla_missed')),
    webhook text NOT NULL REFERENCES webhooks (name),
    PRIMARY KEY (dag_id, event, webhook)
);
CREATE INDEX dag_notify_webhook_idx ON dag_notify (webhook);

-- The outbox: one row per event and webhook, written in the transaction
-- of the state change that raised it. No foreign key to runs (as events,
-- adr/0022): retention prunes the two separately.
CREATE TABLE notifications (
    id              bigserial PRIMARY KEY,
    delivery_id     uuid        NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    event           text        NOT NULL CHECK (event IN ('run_failed', 'run_succeeded', 'task_failed', 'task_retried', 'sla_missed')),
    webhook         text        NOT NULL,
    dag_id          text        NOT NULL,
    run_id          bigint      NOT NULL,
    ti_id           bigint,
    task_id         text,
    try_number      integer,
    subject_state   text        NOT NULL,
    reason          text,
    message         text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    state           text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    last_status     integer,
    last_error      text,
    finished_at     timestamptz,
    CHECK ((state = 'pending') = (finished_at IS NULL))
);
-- The delivery service's due batch, and the oldest pending row's age.
CREATE INDEX notifications_due_idx ON notifications (next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX notifications_pending_idx ON notifications (created_at) WHERE state = 'pending';
-- notifications list --state, newest first; retention by finished_at.
CREATE INDEX notifications_state_idx ON notifications (state, id);
CREATE INDEX notifications_finished_idx ON notifications (finished_at) WHERE state IN ('delivered', 'dead');

-- vigil_enqueue_notifications writes the outbox rows of one event: one
-- per webhook the DAG's notify list names for it (none when it names
-- none: one probe of dag_notify's primary key), and wakes the delivery
-- service. Every caller runs it inside the transaction of its change. It
-- returns how many rows it wrote.
CREATE FUNCTION vigil_enqueue_notifications(p_events text[], p_dag text, p_run bigint, p_ti bigint, p_task text,
                                            p_try integer, p_state text, p_reason text, p_message text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    INSERT INTO notifications (event, webhook, dag_id, run_id, ti_id, task_id, try_number, subject_state, reason, message)
    SELECT n.event, n.webhook, p_dag, p_run, p_ti, p_task, p_try, p_state, p_reason, left(p_message, 4096)
      FROM dag_notify n
     WHERE n.dag_id = p_dag AND n.event = ANY (p_events)
     ORDER BY array_position(p_events, n.event), n.webhook;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_notify('vigil_notify', '');
    END IF;
    RETURN n;
END $$;

-- A TI's failed try: every write that moves a TI into failed or
-- up_for_retry, whoever makes it (a completion, a reaper, an operator's
-- mark, a statement in psql), raises task_failed, and task_retried for
-- up_for_retry, in its own transaction. A TI failed from none never ran a
-- try (an orphaned run's); its run's run_failed reports it.
CREATE FUNCTION vigil_notify_ti() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM vigil_enqueue_notifications(
        CASE WHEN NEW.state = 'up_for_retry' THEN ARRAY['task_failed', 'task_retried'] ELSE ARRAY['task_failed'] END,
        NEW.dag_id, NEW.run_id, NEW.id, NEW.task_id, NEW.try_number, NEW.state, NEW.reason, NEW.message);
    RETURN NULL;
END $$;

CREATE TRIGGER ti_notify AFTER UPDATE OF state ON task_instances
    FOR EACH ROW
    WHEN (NEW.state IN ('failed', 'up_for_retry') AND OLD.state NOT IN ('none', 'failed', 'up_for_retry'))
    EXECUTE FUNCTION vigil_notify_ti();

-- A run's end: success raises run_succeeded; failed or cancelled (a
-- cancel, a run timeout, an orphaned run) raises run_failed.
CREATE FUNCTION vigil_notify_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM vigil_enqueue_notifications(
        CASE WHEN NEW.state = 'success' THEN ARRAY['run_succeeded'] ELSE ARRAY['run_failed'] END,
        NEW.dag_id, NEW.id, NULL, NULL, NULL, NEW.state, NEW.reason, NEW.message);
    RETURN NULL;
END $$;

CREATE TRIGGER run_notify AFTER UPDATE OF state ON runs
    FOR EACH ROW
    WHEN ((NEW.state = 'success' AND OLD.state <> 'success')
          OR (NEW.state IN ('failed', 'cancelled') AND OLD.state NOT IN ('failed', 'cancelled')))
    EXECUTE FUNCTION vigil_notify_run();

-- SLA: the deadline is set when the run is created (the DAG's sla after
-- its data interval's end, or after now for a manual run); the sla
-- service finds live runs past it through runs_sla_idx and stamps
-- sla_missed_at once.
ALTER TABLE runs ADD COLUMN sla_at timestamptz, ADD COLUMN sla_missed_at timestamptz;
CREATE INDEX runs_sla_idx ON runs (sla_at)
    WHERE sla_at IS NOT NULL AND sla_missed_at IS NULL AND state IN ('queued', 'running');

---- create above / drop below ----

DROP INDEX runs_sla_idx;
ALTER TABLE runs DROP COLUMN sla_missed_at, DROP COLUMN sla_at;
DROP TRIGGER run_notify ON runs;
DROP FUNCTION vigil_notify_run();
DROP TRIGGER ti_notify ON task_instances;
DROP FUNCTION vigil_notify_ti();
DROP FUNCTION vigil_enqueue_notifications(text[], text, bigint, bigint, text, integer, text, text, text);
DROP TABLE notifications;
DROP TABLE dag_notify;
DROP TABLE webhooks;
