-- Vigil schema, version 25: task pools and priority_weight (docs/pools.md),
-- and DAG deletion (runs outlive their DAG).
--
-- A task pool caps the running TIs of the tasks that name it across every
-- DAG, run and agent. task_pools.occupied is the pool's running TIs as
-- the claims counted them: a claim adds what it takes, under the pool
-- row's lock, and reads the row after taking that lock, so it sees every
-- earlier claim's count (docs/pools.md, "How the limit holds"). A TI that
-- leaves running only appends a row to task_pool_releases (trigger
-- ti_pool_release): it never waits for the pool row, so no completion,
-- reap or cancel ever waits on a claim. The next claim of the pool folds
-- the releases into occupied. The running TIs of a pool are therefore
-- occupied minus its unfolded releases, and never more than slots.
CREATE TABLE task_pools (
    name        text        PRIMARY KEY,
    slots       integer     NOT NULL CHECK (slots >= 0),
    occupied    integer     NOT NULL DEFAULT 0 CHECK (occupied >= 0),
    description text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE task_pool_releases (
    id   bigserial PRIMARY KEY,
    pool text NOT NULL
);
CREATE INDEX task_pool_releases_pool_idx ON task_pool_releases (pool);

-- pool '' is no pool; priority_weight orders claims (higher first).
ALTER TABLE task_instances ADD COLUMN pool text NOT NULL DEFAULT '';
ALTER TABLE task_instances ADD COLUMN priority_weight integer NOT NULL DEFAULT 1
    CHECK (priority_weight > -2147483648);

-- The claim's index: one group per (required_tags, pool), each in claim
-- order, highest priority_weight first, then oldest. It replaces the
-- tag-set index of migration 013.
DROP INDEX ti_queued_tags_idx;
CREATE INDEX ti_queued_tags_idx ON task_instances (required_tags, pool, (-priority_weight), queued_at, id)
    WHERE state = 'queued';
-- pools list and pools delete: a pool's live TIs.
CREATE INDEX ti_pool_idx ON task_instances (pool, state) WHERE pool <> '';

CREATE FUNCTION vigil_ti_pool_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_pool_releases (pool) VALUES (OLD.pool);
    -- A slot is free: wake the claim long-polls of agents that fit.
    PERFORM pg_notify('vigil_queued', json_build_array(to_json(OLD.required_tags))::text);
    RETURN NULL;
END $$;
CREATE TRIGGER ti_pool_release AFTER UPDATE OF state ON task_instances
    FOR EACH ROW
    WHEN (OLD.pool <> '' AND OLD.state = 'running' AND NEW.state <> 'running')
    EXECUTE FUNCTION vigil_ti_pool_release();
CREATE TRIGGER ti_pool_release_delete AFTER DELETE ON task_instances
    FOR EACH ROW
    WHEN (OLD.pool <> '' AND OLD.state = 'running')
    EXECUTE FUNCTION vigil_ti_pool_release();

-- A deleted DAG's runs stay until retention removes them: runs.dag_id no
-- longer references dags. A new run locks its DAG's row FOR KEY SHARE
-- instead (store.createRunTx), which DeleteDAG's FOR UPDATE waits for.
ALTER TABLE runs DROP CONSTRAINT runs_dag_id_fkey;

---- create above / drop below ----

ALTER TABLE runs ADD CONSTRAINT runs_dag_id_fkey FOREIGN KEY (dag_id) REFERENCES dags (dag_id);
DROP TRIGGER ti_pool_release_delete ON task_instances;
DROP TRIGGER ti_pool_release ON task_instances;
DROP FUNCTION vigil_ti_pool_release();
DROP INDEX ti_pool_idx;
DROP INDEX ti_queued_tags_idx;
CREATE INDEX ti_queued_tags_idx ON task_instances (required_tags, queued_at, id) WHERE state = 'queued';
ALTER TABLE task_instances DROP COLUMN priority_weight;
ALTER TABLE task_instances DROP COLUMN pool;
DROP TABLE task_pool_releases;
DROP TABLE task_pools;
