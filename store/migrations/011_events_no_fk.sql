-- Vigil schema, version 11: events carry no foreign key to runs
-- (adr/0022-events-without-foreign-key.md).
--
-- Every event insert checked events.run_id against runs with a
-- SELECT ... FOR KEY SHARE of the run row: one more lock per claim, start
-- and completion, and a shared lock on one hot row taken by every agent
-- working on a wide run. The invariant is kept another way: an event is
-- written only in the statement or transaction that writes its run or one
-- of its TIs, and runs are deleted only by retention (store.PruneRuns),
-- which deletes their events in the same statement.
ALTER TABLE events DROP CONSTRAINT events_run_id_fkey;

---- create above / drop below ----

DELETE FROM events e WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = e.run_id);
ALTER TABLE events ADD CONSTRAINT events_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE;
