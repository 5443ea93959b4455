-- Vigil schema, version 30: drop ti_run_ordinal_idx (migration 028).
--
-- It served the pages of GET /v1/runs/{id} in declaration order, but as
-- a full index of task_instances it added an entry to each of a TI's row
-- versions: 14% more WAL per TI in the burn-down, more than migration 029
-- saved. The pages now follow task id order through the (run_id,
-- task_id) key, which reads only the page as well (store.GetRunPage).
DROP INDEX ti_run_ordinal_idx;

---- create above / drop below ----

CREATE INDEX ti_run_ordinal_idx ON task_instances (run_id, ordinal);
