-- Vigil schema, version 9: what each replica last reported about itself
-- (docs/console.md, the Cluster page; GET /v1/cluster).
--
-- Every replica, leader or follower, upserts its row every few seconds:
-- whether it leads and in which epoch, its build, and a JSON report of its
-- reapers' last sweeps, its decision counters, the post-leadership grace
-- and the mass-silence brake. Any replica then answers GET /v1/cluster
-- from this table, so the console shows the same cluster from a follower
-- as from the leader. seen_at is the database clock; rows silent for a
-- day are dropped by the next publish.
CREATE TABLE replica_status (
    replica_id text PRIMARY KEY CHECK (replica_id <> ''),
    is_leader  boolean     NOT NULL,
    epoch      bigint      NOT NULL,
    version    text        NOT NULL,
    started_at timestamptz NOT NULL,
    seen_at    timestamptz NOT NULL DEFAULT now(),
    report     jsonb       NOT NULL DEFAULT '{}'
);

---- create above / drop below ----

DROP TABLE replica_status;
