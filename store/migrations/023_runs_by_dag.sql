-- Vigil schema, version 23: a DAG's runs by id, for the console's grid
-- and duration chart (GET /v1/dags/{dag_id}/grid) and `runs list --dag`.
--
-- The newest runs of one DAG were read from runs' primary key backwards,
-- filtered by dag_id: the rows read grew with the runs of every other DAG
-- made since that DAG's last one. With this index the grid of the last N
-- runs reads N index entries whatever the history (store
-- TestDAGGridReadsDoNotGrowWithHistory).
CREATE INDEX runs_dag_idx ON runs (dag_id, id);

---- create above / drop below ----

DROP INDEX runs_dag_idx;
