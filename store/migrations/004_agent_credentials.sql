-- Vigil schema, version 4: per-agent credentials (agent
-- identity). Registration mints a random secret for the agent and returns
-- it once; only its SHA-256 is stored here. Every agent endpoint that acts
-- for an agent id must present the secret whose hash this row holds, so
-- one agent-token holder can no longer claim, heartbeat, complete, ship
-- logs or deregister as another agent (docs/configuration.md, "Agent
-- credentials"). NULL: a row registered before this migration; the next
-- registration under its name sets it.
ALTER TABLE agents ADD COLUMN credential_hash bytea;

---- create above / drop below ----

ALTER TABLE agents DROP COLUMN credential_hash;
