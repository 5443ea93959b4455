-- Vigil schema, version 28: a run's TIs in declaration order, for the
-- pages of GET /v1/runs/{id} (store.GetRunPage).
--
-- Through the (run_id, task_id) key, every page read the run's whole TI
-- set and sorted it by ordinal to keep a thousand: a page of a run of
-- 10,000 TIs took 50 ms or more on a loaded machine, 0.9 ms with this
-- index. run_id and ordinal never change after the insert, so the index
-- costs an entry per TI version that is not a HOT update, like every
-- other index of the table.
CREATE INDEX ti_run_ordinal_idx ON task_instances (run_id, ordinal);

---- create above / drop below ----

DROP INDEX ti_run_ordinal_idx;
