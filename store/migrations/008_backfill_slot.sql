-- Vigil schema, version 8: backfill runs (docs/schedules.md, "Backfill").
--
-- A backfill run has a logical date and a data interval, like a scheduled
-- one. At most one backfill run exists per (dag_id, logical_date), so a
-- repeated backfill over the same range creates nothing new; it is a
-- separate index from the scheduled one, so backfill and scheduled runs
-- never collide with or suppress each other.
ALTER TABLE runs
    ADD CONSTRAINT runs_backfill_slot CHECK (run_type <> 'backfill' OR
        (logical_date IS NOT NULL AND data_interval_start IS NOT NULL AND data_interval_end IS NOT NULL));
CREATE UNIQUE INDEX runs_backfill_slot_idx ON runs (dag_id, logical_date) WHERE run_type = 'backfill';

---- create above / drop below ----

DROP INDEX runs_backfill_slot_idx;
ALTER TABLE runs DROP CONSTRAINT runs_backfill_slot;
