-- Vigil schema, version 20: task outputs (docs/task-environment.md,
-- "Outputs").
--
-- One row per task instance: the outputs of its try try_number, written
-- in the transaction that records that try's success, and replaced by
-- the next try's success (a cleared TI's new try). They are a TI's
-- outputs only while the TI is success at that same try_number, so a
-- cleared TI shows none until its new try succeeds. bytes is the sum of
-- the bytes of the keys and values (at most 64 KiB, outputs.MaxBytes,
-- checked by the agent and again by the server).
CREATE TABLE ti_outputs (
    ti_id      bigint  PRIMARY KEY REFERENCES task_instances (id) ON DELETE CASCADE,
    try_number integer NOT NULL,
    outputs    jsonb   NOT NULL,
    bytes      integer NOT NULL CHECK (bytes >= 0)
);

-- output_too_large, output_invalid: the process exited 0 but its outputs
-- were over the limit, or its VIGIL_OUTPUT file was not in the format.
-- The lists mirror state.Reasons().
ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid'));
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid'));

---- create above / drop below ----

UPDATE task_instances SET reason = 'exit_code' WHERE reason IN ('output_too_large', 'output_invalid');
UPDATE runs SET reason = 'exit_code' WHERE reason IN ('output_too_large', 'output_invalid');
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing'));
ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing'));
DROP TABLE ti_outputs;
