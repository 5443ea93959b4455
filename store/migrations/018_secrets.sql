-- Vigil schema, version 18: named secrets, sealed (docs/security.md
-- "Secrets", adr/0030-secrets.md).
--
-- A secret's value is stored only as secrets.Box sealed it: AES-256-GCM
-- under the key of --secrets-key-file, with a fresh nonce per version and
-- the name and version as additional data. The database never holds the
-- key or a value in the clear. version counts the sets of one name.
CREATE TABLE secrets (
    name       text PRIMARY KEY,
    version    bigint NOT NULL CHECK (version > 0),
    sealed     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The key check: a known text sealed by the first replica that started
-- with a key. Every later start opens it before it serves a secret, so a
-- wrong key is a start-up error, never a secret that fails at a claim.
CREATE TABLE secrets_key_check (
    id         int PRIMARY KEY CHECK (id = 1),
    sealed     bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- secret_missing: the secret a task's env names was deleted after the
-- DAG was applied; the claim fails the try rather than run it without
-- the value. The lists mirror state.Reasons().
ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing'));
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing'));

---- create above / drop below ----

UPDATE task_instances SET reason = 'start_failed' WHERE reason = 'secret_missing';
UPDATE runs SET reason = 'start_failed' WHERE reason = 'secret_missing';
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed'));
ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed'));
DROP TABLE secrets_key_check;
DROP TABLE secrets;
