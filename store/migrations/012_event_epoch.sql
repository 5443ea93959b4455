-- Vigil schema, version 12: every event a leader writes records the epoch
-- (fencing token) of the term that wrote it (docs/design.md §8).
--
-- LeaderTx sets the transaction-local setting vigil.epoch while it holds
-- the fence FOR SHARE; the column's default reads it, so every INSERT INTO
-- events inside a leader transaction carries the epoch without naming it,
-- and every other write (agent requests, operator requests) leaves it
-- NULL. A checker can then prove that no row carries an epoch older than
-- the fence at its commit (docs/reliability.md, invariant 3).
ALTER TABLE events ADD COLUMN epoch bigint
    DEFAULT nullif(current_setting('vigil.epoch', true), '')::bigint;

---- create above / drop below ----

ALTER TABLE events DROP COLUMN epoch;
