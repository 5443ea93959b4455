-- Vigil schema, version 13: task_instances.agent_id carries no foreign key,
-- and ti_agent_idx holds only the TIs that name an agent
-- (adr/0027-ti-agent-without-foreign-key.md).
--
-- Every claim set agent_id on each TI it took, and PostgreSQL checked each
-- against agents with a SELECT ... FOR KEY SHARE of the agent row: one
-- probe and one row lock per claimed TI. The invariant the key guarded,
-- "a TI names an agent row that exists, or none", is kept by the writers:
-- the claim is the only statement that sets agent_id, and it writes its
-- TIs only after it has updated the agent row (so a claim never names an
-- agent that retention has deleted); retention (store.PruneAgents) locks
-- the agents it deletes, rechecking that they are still prunable, and
-- unlinks their TIs in the same statement, as ON DELETE SET NULL did.
ALTER TABLE task_instances DROP CONSTRAINT task_instances_agent_id_fkey;

-- Until a claim sets agent_id, a TI's writes (the trigger's insert, the
-- scheduler's none -> scheduled -> queued) no longer add an entry to
-- ti_agent_idx. Every reader of the index names an agent_id.
DROP INDEX ti_agent_idx;
CREATE INDEX ti_agent_idx ON task_instances (agent_id, state) WHERE agent_id IS NOT NULL;

---- create above / drop below ----

DROP INDEX ti_agent_idx;
CREATE INDEX ti_agent_idx ON task_instances (agent_id, state);
UPDATE task_instances t SET agent_id = NULL
 WHERE t.agent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = t.agent_id);
ALTER TABLE task_instances ADD CONSTRAINT task_instances_agent_id_fkey
    FOREIGN KEY (agent_id) REFERENCES agents (id) ON DELETE SET NULL;
