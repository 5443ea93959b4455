-- Vigil schema, version 5: the leader fence gets an explicit domain
-- (docs/operations.md "The leader fence").
--
-- A term's fencing token (leader_fence.epoch, what LeaderTx compares) is
-- now generation × 2^40 + revision:
--   * domain: where the revision comes from: 'lite' (leader_epoch_seq) or
--     'etcd' (the leader key's create revision). NULL after a reset and on
--     rows from before this version: the next acquirer sets it.
--   * revision: the domain's own number; a candidate must bring a larger
--     one, from the same domain.
--   * generation: bumped only by an audited reset (`vigil fence reset`),
--     which starts a new domain: after an etcd restore from a backup
--     (revisions went back) or a switch between Lite and Pro. Every token
--     of an older generation is smaller than every token of a newer one,
--     so a leader of the old generation is fenced out for good.
-- Existing rows keep their epoch as the revision of generation 0, so their
-- tokens do not change.
ALTER TABLE leader_fence
    ADD COLUMN generation bigint NOT NULL DEFAULT 0,
    ADD COLUMN domain     text CHECK (domain IN ('lite', 'etcd')),
    ADD COLUMN revision   bigint NOT NULL DEFAULT 0;
UPDATE leader_fence SET revision = epoch;
ALTER TABLE leader_fence
    ADD CONSTRAINT leader_fence_revision_range CHECK (revision >= 0 AND revision < 1099511627776),
    ADD CONSTRAINT leader_fence_token CHECK (epoch = generation * 1099511627776 + revision);

-- fence_audit records every reset of the fence: who, when, why, and the
-- fence before and after. Rows are never updated or deleted by Vigil.
CREATE TABLE fence_audit (
    id              bigserial   PRIMARY KEY,
    name            text        NOT NULL,
    action          text        NOT NULL CHECK (action IN ('reset')),
    at              timestamptz NOT NULL DEFAULT now(),
    actor           text        NOT NULL,
    reason          text        NOT NULL CHECK (reason <> ''),
    before_generation bigint    NOT NULL,
    before_domain   text,
    before_revision bigint      NOT NULL,
    before_holder   text,
    after_generation bigint     NOT NULL
);

---- create above / drop below ----

DROP TABLE fence_audit;
ALTER TABLE leader_fence
    DROP CONSTRAINT leader_fence_token,
    DROP CONSTRAINT leader_fence_revision_range,
    DROP COLUMN revision,
    DROP COLUMN domain,
    DROP COLUMN generation;
