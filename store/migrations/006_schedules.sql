-- Vigil schema, version 6: schedules (adr/0017-schedules.md,
-- docs/schedules.md).
--
-- A run records how it came to be: 'manual' (vigil runs trigger),
-- 'scheduled' (a schedule slot) or 'backfill'. A scheduled run has a
-- logical date and a data interval [data_interval_start,
-- data_interval_end). At most one scheduled run exists per slot; manual
-- and backfill runs are outside the index and never collide with a slot.
ALTER TABLE runs
    ADD COLUMN run_type            text NOT NULL DEFAULT 'manual'
                                   CHECK (run_type IN ('manual', 'scheduled', 'backfill')),
    ADD COLUMN logical_date        timestamptz,
    ADD COLUMN data_interval_start timestamptz,
    ADD COLUMN data_interval_end   timestamptz,
    ADD CONSTRAINT runs_scheduled_slot CHECK (run_type <> 'scheduled' OR
        (logical_date IS NOT NULL AND data_interval_start IS NOT NULL AND data_interval_end IS NOT NULL));
CREATE UNIQUE INDEX runs_scheduled_slot_idx ON runs (dag_id, logical_date) WHERE run_type = 'scheduled';

-- paused stops the schedule (manual triggers still work); next_slot is
-- the logical date of the next slot the schedules service will create
-- (NULL: not computed yet). max_active_runs caps the DAG's running runs
-- (NULL: no cap).
ALTER TABLE dags
    ADD COLUMN paused          boolean NOT NULL DEFAULT false,
    ADD COLUMN next_slot       timestamptz,
    ADD COLUMN max_active_runs integer CHECK (max_active_runs > 0);

---- create above / drop below ----

ALTER TABLE dags
    DROP COLUMN max_active_runs,
    DROP COLUMN next_slot,
    DROP COLUMN paused;
DROP INDEX runs_scheduled_slot_idx;
ALTER TABLE runs
    DROP CONSTRAINT runs_scheduled_slot,
    DROP COLUMN data_interval_end,
    DROP COLUMN data_interval_start,
    DROP COLUMN logical_date,
    DROP COLUMN run_type;
