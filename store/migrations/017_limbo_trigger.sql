-- Vigil schema, version 17: a run that loses its last active TI is marked
-- idle in the same transaction, whoever wrote (issue 22, the orphan SLA).
--
-- The orphan-run reaper reads runs_idle_idx only (its scan proof: a sweep
-- with nothing to reap reads no TI). Its candidates were marked by the
-- scheduler, which looks at a run when a write of Vigil's appends it to
-- run_dirty; a write outside Vigil (an operator's UPDATE in psql, a
-- restore) appended nothing, so such a run waited for the once-a-minute
-- reconcile before its orphan threshold even started.
--
-- This trigger fires only when a TI leaves the active states (scheduled,
-- queued, running, up_for_retry) and, when the run is still running with
-- no active TI left, sets its idle_since (the orphan clock starts at the
-- write) and appends it to run_dirty with a wake-up of the scheduler, so
-- the scheduler looks at it at once: it finalizes a run whose TIs are all terminal, schedules
-- a TI the write made runnable (and so clears the mark), or leaves the
-- mark for the orphan reaper. A write that leaves other TIs active costs
-- one probe of ti_live_idx. Two concurrent writers that each end one of a
-- run's last two active TIs both see the other's TI still active; the
-- scheduler's own writes cover that (their run is dirty anyway), and for
-- two concurrent writes outside Vigil the reconcile still does.
CREATE FUNCTION vigil_ti_left_active() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM task_instances t WHERE t.run_id = NEW.run_id
                  AND t.state IN ('scheduled', 'queued', 'running', 'up_for_retry')) THEN
        RETURN NULL;
    END IF;
    -- SKIP LOCKED: a run row another transaction holds is being worked on
    -- by Vigil (the scheduler or a reaper takes the run row before its
    -- TIs), which looks at the run itself; waiting here, with the TI row
    -- held, would invert that order and could deadlock.
    UPDATE runs SET idle_since = now()
     WHERE id = (SELECT id FROM runs WHERE id = NEW.run_id AND state = 'running' AND idle_since IS NULL
                    FOR NO KEY UPDATE SKIP LOCKED);
    INSERT INTO run_dirty (run_id)
    SELECT NEW.run_id WHERE EXISTS (SELECT 1 FROM runs WHERE id = NEW.run_id AND state = 'running');
    IF FOUND THEN
        PERFORM pg_notify('vigil_scheduler', '');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER ti_left_active AFTER UPDATE OF state ON task_instances
    FOR EACH ROW
    WHEN (OLD.state IN ('scheduled', 'queued', 'running', 'up_for_retry')
          AND NEW.state NOT IN ('scheduled', 'queued', 'running', 'up_for_retry'))
    EXECUTE FUNCTION vigil_ti_left_active();

---- create above / drop below ----

DROP TRIGGER ti_left_active ON task_instances;
DROP FUNCTION vigil_ti_left_active();
