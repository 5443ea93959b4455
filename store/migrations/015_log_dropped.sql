-- Vigil schema, version 15: a log records what it lost (issue 23).
--
-- An agent that had to drop log lines (its buffer overflowed while the
-- control plane was unreachable) says how many in the gap marker it stores
-- at the place of the loss. task_logs.dropped is that count on the marker
-- line (0 on every other line), and task_instances.log_dropped sums it over
-- the TI's tries, so a TI whose log is incomplete says so without a scan of
-- its lines. Lines stored + the markers' dropped = lines printed.
ALTER TABLE task_logs ADD COLUMN dropped bigint NOT NULL DEFAULT 0;
ALTER TABLE task_instances ADD COLUMN log_dropped bigint NOT NULL DEFAULT 0;

---- create above / drop below ----

ALTER TABLE task_instances DROP COLUMN log_dropped;
ALTER TABLE task_logs DROP COLUMN dropped;
