-- Vigil schema, version 19: the ti_left_active trigger of migration 017
-- fires only for writes outside Vigil.
--
-- Every write of Vigil's that ends a TI already appends its run to
-- run_dirty, and the scheduler marks the run idle when it has no active TI
-- left; the trigger's probe for each such TI cost a completion batch about
-- a fifth of its time (store BenchmarkClaimCompleteBurnDown, complete-ms
-- 3.5 -> 4.3). Vigil's pools connect with an application_name starting
-- with "vigil" (store.openPools, the leader sessions' vigil-leader) unless
-- the database URL names another; a session whose name does not is
-- outside Vigil, and the trigger keeps the orphan SLA for it. A database
-- URL that sets its own application_name only makes Vigil's writes fire
-- the trigger too: the cost comes back, never a missed run.
DROP TRIGGER ti_left_active ON task_instances;
CREATE TRIGGER ti_left_active AFTER UPDATE OF state ON task_instances
    FOR EACH ROW
    WHEN (OLD.state IN ('scheduled', 'queued', 'running', 'up_for_retry')
          AND NEW.state NOT IN ('scheduled', 'queued', 'running', 'up_for_retry')
          AND current_setting('application_name') NOT LIKE 'vigil%')
    EXECUTE FUNCTION vigil_ti_left_active();

---- create above / drop below ----

DROP TRIGGER ti_left_active ON task_instances;
CREATE TRIGGER ti_left_active AFTER UPDATE OF state ON task_instances
    FOR EACH ROW
    WHEN (OLD.state IN ('scheduled', 'queued', 'running', 'up_for_retry')
          AND NEW.state NOT IN ('scheduled', 'queued', 'running', 'up_for_retry'))
    EXECUTE FUNCTION vigil_ti_left_active();
