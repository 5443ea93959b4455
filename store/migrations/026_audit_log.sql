-- Vigil schema, version 26: the audit log (docs/security.md "The audit
-- log", adr/0034-audit-in-the-change-transaction.md).
--
-- One row per state-changing API call, allowed or refused, and per fence
-- reset. A call that changed the database wrote its row in the same
-- transaction as the change (store.AuditRecord); a refused or failed call
-- has a row of its own. Every text column is bounded by the writer
-- (store.AuditRecord.bounded), so a row is at most a few KiB. at is the
-- database clock. The leader's retention service prunes rows older than
-- --retention-audit; nothing else deletes or updates them.
CREATE TABLE audit_log (
    id         bigserial   PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    actor      text        NOT NULL,
    role       text        NOT NULL DEFAULT '',
    auth       text        NOT NULL DEFAULT '',
    method     text        NOT NULL DEFAULT '',
    route      text        NOT NULL,
    target     text        NOT NULL DEFAULT '',
    request_id text        NOT NULL DEFAULT '',
    client     text        NOT NULL DEFAULT '',
    result     text        NOT NULL CHECK (result IN ('ok', 'refused', 'failed')),
    status     int,
    message    text        NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, id);

-- The fence's resets so far join the log (fence_audit keeps the fence
-- before and after each one for `vigil fence show`).
INSERT INTO audit_log (at, actor, auth, route, target, result, message)
SELECT at, actor, 'database', 'vigil fence reset', 'fence/' || name, 'ok', left(reason, 512)
  FROM fence_audit ORDER BY id;

---- create above / drop below ----

DROP TABLE audit_log;
