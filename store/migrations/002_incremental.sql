-- Vigil schema, version 2: incremental scheduling and indexes for the hot
-- paths (adr/0011-incremental-scheduler.md). Every leader loop reads what
-- changed or what is due, never the whole of task_instances.

-- run_dirty is the scheduler's work queue. Completions, reaps, cancels,
-- triggers and due retries append their run here in the same transaction
-- as the change, so a lost NOTIFY loses nothing. Rows are insert-only (no
-- unique key: concurrent completions of one run never wait on each other);
-- the tick deletes every row of the runs it takes.
CREATE TABLE run_dirty (
    id     bigserial PRIMARY KEY,
    run_id bigint NOT NULL
);
CREATE INDEX run_dirty_run_idx ON run_dirty (run_id);

-- deadline_at: when a run times out (queued_at, then start_date, plus
-- timeout), so the run-timeout sweep reads only what is due.
ALTER TABLE runs ADD COLUMN deadline_at timestamptz;
UPDATE runs SET deadline_at = coalesce(start_date, queued_at) + timeout
 WHERE timeout IS NOT NULL AND state IN ('queued', 'running');
-- idle_since: set by the scheduler when a running run it looked at has no
-- active TI and could not be finalized; the orphan reaper's candidates.
ALTER TABLE runs ADD COLUMN idle_since timestamptz;
CREATE INDEX runs_queued_idx ON runs (id) WHERE state = 'queued';
CREATE INDEX runs_live_idx ON runs (id) WHERE state IN ('queued', 'running');
CREATE INDEX runs_deadline_idx ON runs (deadline_at)
    WHERE state IN ('queued', 'running') AND deadline_at IS NOT NULL;
CREATE INDEX runs_idle_idx ON runs (idle_since) WHERE state = 'running' AND idle_since IS NOT NULL;

-- Heartbeats rewrite last_heartbeat_at on every running TI every interval:
-- no index may cover it, so those updates stay HOT (heap-only). Stale TIs
-- are found through their agent instead (agents.oldest_heartbeat_at).
DROP INDEX ti_running_idx;
DROP INDEX ti_running_agent_idx;
-- A full index on agent_id: agent pruning's ON DELETE SET NULL and the
-- per-agent running count both use it.
CREATE INDEX ti_agent_idx ON task_instances (agent_id, state);
-- Running TIs whose agent row was pruned: the agent-lost reaper's second
-- source of candidates.
CREATE INDEX ti_running_unowned_idx ON task_instances (id) WHERE state = 'running' AND agent_id IS NULL;
-- timeout_at = started_at + execution_timeout, set once when the agent
-- reports the start: the execution-timeout backstop reads only what is due.
ALTER TABLE task_instances ADD COLUMN timeout_at timestamptz;
CREATE INDEX ti_timeout_idx ON task_instances (timeout_at) WHERE state = 'running' AND timeout_at IS NOT NULL;
-- Active TIs per run: max_active_tasks counts and the orphan check.
CREATE INDEX ti_live_idx ON task_instances (run_id)
    WHERE state IN ('scheduled', 'queued', 'running', 'up_for_retry');
DROP INDEX ti_scheduled_idx;
CREATE INDEX ti_scheduled_idx ON task_instances (run_id, ordinal) WHERE state = 'scheduled';
-- Room on each page for heap-only heartbeat updates.
ALTER TABLE task_instances SET (fillfactor = 80);

-- oldest_heartbeat_at is no later than the last heartbeat of any running
-- TI of the agent (maintained by claims and heartbeats), so every stale
-- running TI belongs to an agent this index finds.
ALTER TABLE agents ADD COLUMN oldest_heartbeat_at timestamptz;
UPDATE agents a SET oldest_heartbeat_at = (
    SELECT least(a.last_heartbeat_at, min(t.last_heartbeat_at)) FROM task_instances t
     WHERE t.agent_id = a.id AND t.state = 'running');
CREATE INDEX agents_oldest_hb_idx ON agents (oldest_heartbeat_at);
CREATE INDEX agents_active_hb_idx ON agents (last_heartbeat_at) WHERE state = 'active';
CREATE INDEX agents_gone_idx ON agents (last_heartbeat_at) WHERE state IN ('inactive', 'deregistered');

-- Reasons are part of the contract too (state package).
ALTER TABLE task_instances ADD CONSTRAINT task_instances_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent'));
ALTER TABLE runs ADD CONSTRAINT runs_reason_check CHECK (reason IN (
    'agent_lost', 'dispatch_lost', 'orphaned', 'execution_timeout', 'run_timeout', 'cancelled',
    'exit_code', 'upstream_failed', 'no_matching_agent'));

---- create above / drop below ----

ALTER TABLE runs DROP CONSTRAINT runs_reason_check;
ALTER TABLE task_instances DROP CONSTRAINT task_instances_reason_check;
DROP INDEX agents_gone_idx;
DROP INDEX agents_active_hb_idx;
DROP INDEX agents_oldest_hb_idx;
ALTER TABLE agents DROP COLUMN oldest_heartbeat_at;
ALTER TABLE task_instances RESET (fillfactor);
DROP INDEX ti_scheduled_idx;
CREATE INDEX ti_scheduled_idx ON task_instances (dag_id, id) WHERE state = 'scheduled';
DROP INDEX ti_live_idx;
DROP INDEX ti_timeout_idx;
ALTER TABLE task_instances DROP COLUMN timeout_at;
DROP INDEX ti_running_unowned_idx;
DROP INDEX ti_agent_idx;
CREATE INDEX ti_running_agent_idx ON task_instances (agent_id) WHERE state = 'running';
CREATE INDEX ti_running_idx ON task_instances (last_heartbeat_at) WHERE state = 'running';
DROP INDEX runs_idle_idx;
DROP INDEX runs_deadline_idx;
DROP INDEX runs_live_idx;
DROP INDEX runs_queued_idx;
ALTER TABLE runs DROP COLUMN idle_since;
ALTER TABLE runs DROP COLUMN deadline_at;
DROP TABLE run_dirty;
