-- Vigil schema, version 29: events keyed by (run_id, id), one index
-- instead of two.
--
-- Every read of events names its run (a run's timeline page, the late
-- completions of a run, the log and late checks of a TI, retention's
-- delete); the primary key on id alone served none of them, yet every
-- event paid an entry in it beside events_run_idx (run_id, id). A TI
-- writes two events (its claim and its end), so this is two btree entries
-- fewer per TI (docs/performance.md, "One index for events"). id stays
-- unique on its own (bigserial); the key (run_id, id) is what the reads
-- use. Building the key reads the table once under its lock: on a year of
-- history, expect this migration to take a while.
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (run_id, id);
DROP INDEX events_run_idx;

---- create above / drop below ----

CREATE INDEX events_run_idx ON events (run_id, id);
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (id);
