-- Vigil schema, version 22: trigger rules and skip_exit_code
-- (docs/trigger-rules.md), snapshotted on each TI at trigger time with the
-- rest of its task.
--
-- trigger_rule: which states of its upstreams let the TI run
-- (dag.Task.TriggerRule; package trigger decides). skip_exit_code: the
-- exit code that ends a try skipped (dag.Task.SkipExitCode); NULL: none.
-- Reasons skip_exit_code and trigger_rule record why a TI was skipped.
-- The lists mirror state.Reasons().
ALTER TABLE task_instances ADD COLUMN trigger_rule text NOT NULL DEFAULT 'all_success';
ALTER TABLE task_instances ADD COLUMN skip_exit_code integer CHECK (skip_exit_code BETWEEN 1 AND 255);

ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid', 'marked', 'skip_exit_code', 'trigger_rule'));
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid', 'marked', 'skip_exit_code', 'trigger_rule'));

---- create above / drop below ----

-- A skipped TI keeps its state without the reasons version 21 lacks.
UPDATE task_instances SET reason = NULL WHERE reason IN ('skip_exit_code', 'trigger_rule');
ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid', 'marked'));
ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent', 'agent_shutdown', 'signal', 'start_failed',
    'secret_missing', 'output_too_large', 'output_invalid', 'marked'));
ALTER TABLE task_instances DROP COLUMN skip_exit_code;
ALTER TABLE task_instances DROP COLUMN trigger_rule;
