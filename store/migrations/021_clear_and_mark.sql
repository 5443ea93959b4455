-- Vigil schema, version 21: clear and mark (docs/rerun.md).
--
-- marked: the reason of a TI an operator set to success or failed by hand
-- (vigil tasks mark), and of a run such a TI failed. The lists mirror
-- state.Reasons().
ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid', 'marked'));
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid', 'marked'));

-- retry_base: the try_number a TI had when it was last cleared. A cleared
-- TI gets its retries again (Airflow's max_tries = try_number + retries on
-- clear): it may run tries retry_base+1 .. retry_base+retries+1, while
-- try_number keeps counting.
ALTER TABLE task_instances ADD COLUMN retry_base integer NOT NULL DEFAULT 0 CHECK (retry_base >= 0);

---- create above / drop below ----

ALTER TABLE task_instances DROP COLUMN retry_base;
UPDATE task_instances SET reason = CASE WHEN state = 'failed' THEN 'exit_code' END WHERE reason = 'marked';
UPDATE runs SET reason = 'exit_code' WHERE reason = 'marked';
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid'));
ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid'));
