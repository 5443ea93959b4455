-- Vigil schema, version 3: reasons of their own for tasks killed by an
-- agent's shutdown, by a signal Vigil did not send, or that could not
-- start. They were recorded as exit_code with no exit
-- code. The lists mirror state.Reasons(); store/state_schema_test.go
-- checks that they agree.

ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed'));
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed'));

---- create above / drop below ----

-- Rows with the new reasons go back to what version 2 recorded for them.
UPDATE task_instances SET reason = 'exit_code' WHERE reason IN ('agent_shutdown', 'signal', 'start_failed');
UPDATE runs SET reason = 'exit_code' WHERE reason IN ('agent_shutdown', 'signal', 'start_failed');
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent'));
ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent'));
