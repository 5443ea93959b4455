-- Vigil schema, version 27: runs by state, and a DAG's runs by state, for
-- `runs list --state` with and without --dag (GET /v1/runs?state=).
--
-- Filtered by state, the newest runs were read from runs' primary key (or
-- runs_dag_idx) backwards, keeping the ones in that state: a rare state
-- (the failed runs among a year of successes) read the whole history.
-- With these indexes a page reads its own runs whatever the history
-- (store TestAPIReadsDoNotGrowWithHistory).
CREATE INDEX runs_state_idx ON runs (state, id);
CREATE INDEX runs_dag_state_idx ON runs (dag_id, state, id);

---- create above / drop below ----

DROP INDEX runs_dag_state_idx;
DROP INDEX runs_state_idx;
