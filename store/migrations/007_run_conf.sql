-- Vigil schema, version 7: run parameters (docs/params.md).
--
-- conf holds the run's parameters, a JSON object key -> string, number or
-- bool, checked against the DAG's params and with their defaults filled
-- (dag.Spec.CheckConf). NULL: a run without parameters. A task receives
-- each key as VIGIL_PARAM_<KEY>.
ALTER TABLE runs ADD COLUMN conf jsonb CHECK (conf IS NULL OR jsonb_typeof(conf) = 'object');

---- create above / drop below ----

ALTER TABLE runs DROP COLUMN conf;
