-- Vigil schema, version 1. docs/design.md §3 (data model), §4 (agents), §8 (fence).
-- All timestamps are timestamptz from the database clock.

CREATE TABLE dags (
    dag_id           text PRIMARY KEY,
    spec             jsonb       NOT NULL,
    spec_hash        text        NOT NULL,
    max_active_tasks integer     NOT NULL CHECK (max_active_tasks > 0),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    id                bigserial PRIMARY KEY,
    name              text        NOT NULL UNIQUE,
    tags              text[]      NOT NULL DEFAULT '{}',
    capacity          integer     NOT NULL CHECK (capacity > 0),
    state             text        NOT NULL DEFAULT 'active'
                      CHECK (state IN ('active', 'inactive', 'deregistered')),
    registered_at     timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE runs (
    id               bigserial PRIMARY KEY,
    dag_id           text        NOT NULL REFERENCES dags (dag_id),
    state            text        NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'success', 'failed', 'cancelled')),
    reason           text,
    message          text,
    timeout          interval,
    max_active_tasks integer     NOT NULL,
    queued_at        timestamptz NOT NULL DEFAULT now(),
    start_date       timestamptz,
    end_date         timestamptz,
    -- updated_at moves on every change to the run or one of its TIs: the
    -- orphan-run reaper's "nothing changed for the threshold" signal.
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runs_active_idx ON runs (dag_id, id) WHERE state IN ('queued', 'running');
CREATE INDEX runs_terminal_end_idx ON runs (end_date) WHERE state IN ('success', 'failed', 'cancelled');

CREATE TABLE task_instances (
    id                bigserial PRIMARY KEY,
    run_id            bigint      NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    dag_id            text        NOT NULL,
    task_id           text        NOT NULL,
    ordinal           integer     NOT NULL,
    state             text        NOT NULL DEFAULT 'none'
                      CHECK (state IN ('none', 'scheduled', 'queued', 'running', 'success', 'failed',
                                       'up_for_retry', 'upstream_failed', 'skipped', 'cancelled')),
    reason            text,
    message           text,
    command           text[]      NOT NULL,
    env               jsonb       NOT NULL DEFAULT '{}',
    required_tags     text[]      NOT NULL DEFAULT '{}',
    upstream          text[]      NOT NULL DEFAULT '{}',
    retries           integer     NOT NULL DEFAULT 0,
    retry_delay       interval    NOT NULL DEFAULT '0',
    retry_exponential boolean     NOT NULL DEFAULT false,
    max_retry_delay   interval    NOT NULL DEFAULT '1 hour',
    execution_timeout interval,
    try_number        integer     NOT NULL DEFAULT 0,
    dispatch_attempts integer     NOT NULL DEFAULT 0,
    attempt_id        uuid,
    agent_id          bigint      REFERENCES agents (id) ON DELETE SET NULL,
    exit_code         integer,
    queued_at         timestamptz,
    claimed_at        timestamptz,
    started_at        timestamptz,
    last_heartbeat_at timestamptz,
    end_date          timestamptz,
    next_retry_at     timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, task_id)
);
-- Partial indexes on the active states: the claim query, the scheduler's
-- steps and the reapers only ever look at these.
CREATE INDEX ti_queued_idx ON task_instances (queued_at, id) WHERE state = 'queued';
CREATE INDEX ti_running_idx ON task_instances (last_heartbeat_at) WHERE state = 'running';
CREATE INDEX ti_running_agent_idx ON task_instances (agent_id) WHERE state = 'running';
CREATE INDEX ti_pending_idx ON task_instances (run_id) WHERE state IN ('none', 'scheduled', 'up_for_retry');
CREATE INDEX ti_scheduled_idx ON task_instances (dag_id, id) WHERE state = 'scheduled';
CREATE INDEX ti_retry_idx ON task_instances (next_retry_at) WHERE state = 'up_for_retry';

CREATE TABLE events (
    id         bigserial PRIMARY KEY,
    run_id     bigint      NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    ti_id      bigint,
    task_id    text,
    try_number integer,
    attempt_id uuid,
    agent_id   bigint,
    kind       text        NOT NULL,
    message    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_run_idx ON events (run_id, id);

CREATE TABLE task_logs (
    id          bigserial PRIMARY KEY,
    ti_id       bigint      NOT NULL REFERENCES task_instances (id) ON DELETE CASCADE,
    try_number  integer     NOT NULL,
    attempt_id  uuid        NOT NULL,
    seq         bigint      NOT NULL,
    stream      text        NOT NULL,
    ts          timestamptz NOT NULL,
    line        text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (attempt_id, seq)
);
CREATE INDEX task_logs_ti_idx ON task_logs (ti_id, try_number, seq);

-- docs/design.md §8: leader-only writes check epoch FOR SHARE inside their
-- transaction. Lite takes epochs from the sequence; Pro from etcd revisions.
CREATE TABLE leader_fence (
    name        text PRIMARY KEY,
    epoch       bigint      NOT NULL DEFAULT 0,
    holder      text,
    acquired_at timestamptz
);
INSERT INTO leader_fence (name) VALUES ('scheduler');
CREATE SEQUENCE leader_epoch_seq;

-- Runtime-tunable settings shared by every replica (reaper thresholds).
CREATE TABLE settings (
    name       text PRIMARY KEY,
    value      text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE settings;
DROP SEQUENCE leader_epoch_seq;
DROP TABLE leader_fence;
DROP TABLE task_logs;
DROP TABLE events;
DROP TABLE task_instances;
DROP TABLE runs;
DROP TABLE agents;
DROP TABLE dags;
